package rdmacm

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/uverbs"
)

// Where code ported from librdmacm would meet a difference (issue [W]
// #56), the low-level calls do what librdmacm's do.

// lowLevel is a connection request made on the low level: the server's
// channel and listening ID, the client's channel, ID and QP (nil
// without), and the CONNECT_REQUEST's event on the server's channel, which
// the caller acknowledges.
type lowLevel struct {
	sch, cch *EventChannel
	lid, cid *ID
	cqp      *uverbs.QP
	req      *Event
}

// lowLevelRequest listens on port n in ps, resolves a client ID to it,
// gives it an RC QP if qp, and connects with p.
func lowLevelRequest(t *testing.T, ps PortSpace, n int, qp bool, p *ConnParam) *lowLevel {
	t.Helper()
	ll := &lowLevel{sch: newChannel(t), cch: newChannel(t)}
	var err error
	if ll.lid, err = ll.sch.NewID(ps); err != nil {
		t.Fatal(err)
	}
	addr := netip.AddrPortFrom(rxeIP, testPort(n))
	if err := ll.lid.Bind(addr); err != nil {
		t.Fatal(err)
	}
	if err := ll.lid.Listen(4); err != nil {
		t.Fatal(err)
	}
	if ll.cid, err = ll.cch.NewID(ps); err != nil {
		t.Fatal(err)
	}
	if err := ll.cid.ResolveAddr(netip.AddrPort{}, addr, time.Second); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, ll.cch, EventAddrResolved).Ack()
	if err := ll.cid.ResolveRoute(time.Second); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, ll.cch, EventRouteResolved).Ack()
	if qp {
		ll.cqp = qpOn(t, ll.cid)
	}
	if err := ll.cid.Connect(p); err != nil {
		t.Fatal(err)
	}
	ll.req = expectEvent(t, ll.sch, EventConnectRequest)
	return ll
}

// TestConnectNilOffersDeviceMax: ID.Connect(nil) offers the device's most
// RDMA reads and atomics in flight, as rdma_connect(id, NULL) does, read
// from the peer's CONNECT_REQUEST (the kernel swaps the two there); so
// does MaxResources in a given ConnParam, and 0 stays 0.
func TestConnectNilOffersDeviceMax(t *testing.T) {
	requireCM(t)
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	attr, err := ctx.QueryDevice()
	ctx.Close()
	if err != nil {
		t.Fatal(err)
	}
	resp, init := uint8(min(attr.MaxQPRdAtom, 255)), uint8(min(attr.MaxQPInitRdAtom, 255))
	for i, tc := range []struct {
		name                   string
		qp                     bool
		p                      *ConnParam
		wantResp, wantInit     uint8 // as the server sees them
		wantRetry, wantRNRetry uint8
	}{
		{"nil", true, nil, init, resp, 7, 7},
		{"nil/no QP", false, nil, init, resp, 7, 7},
		{"MaxResources", true, &ConnParam{ResponderResources: MaxResources, InitiatorDepth: 2, RetryCount: 5}, 2, resp, 5, 0},
		{"zero", true, &ConnParam{RetryCount: 7, RNRRetryCount: 7}, 0, 0, 7, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := lowLevelRequest(t, PortSpaceTCP, 60+i, tc.qp, tc.p).req
			defer req.Ack()
			got := req.Param
			t.Logf("device: %d reads as target, %d as initiator; the request offers (server's view) responder %d, initiator %d, retry %d, RNR retry %d",
				attr.MaxQPRdAtom, attr.MaxQPInitRdAtom, got.ResponderResources, got.InitiatorDepth, got.RetryCount, got.RNRRetryCount)
			if got.ResponderResources != tc.wantResp || got.InitiatorDepth != tc.wantInit {
				t.Errorf("request offers responder resources %d, initiator depth %d; want %d, %d", got.ResponderResources, got.InitiatorDepth, tc.wantResp, tc.wantInit)
			}
			if got.RetryCount != tc.wantRetry || got.RNRRetryCount != tc.wantRNRetry {
				t.Errorf("request's retry counts %d, RNR %d; want %d, %d", got.RetryCount, got.RNRRetryCount, tc.wantRetry, tc.wantRNRetry)
			}
		})
	}
}

// TestAcceptOverLimitRejects: an Accept whose private data is over the
// limit fails with EINVAL and rejects the request, as librdmacm's does
// (there the kernel's rdma_accept fails and rejects): the peer hears
// REJECTED with reason 28 (consumer defined) on RC, UNREACHABLE on UD,
// within a second, instead of waiting for its own timeout. A second
// Accept of the same request fails.
func TestAcceptOverLimitRejects(t *testing.T) {
	requireCM(t)
	for i, tc := range []struct {
		name string
		ps   PortSpace
		max  int
		want EventType
	}{
		{"RC", PortSpaceTCP, MaxAcceptPrivateData, EventRejected},
		{"UD", PortSpaceUDP, MaxAcceptPrivateDataUD, EventUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ll := lowLevelRequest(t, tc.ps, 70+i, tc.ps == PortSpaceTCP, &ConnParam{RetryCount: 7, RNRRetryCount: 7})
			cch, req := ll.cch, ll.req
			child := req.ID
			req.Ack()
			var sqp *uverbs.QP
			if tc.ps == PortSpaceTCP {
				sqp = qpOn(t, child)
			}
			err := child.Accept(&ConnParam{PrivateData: make([]byte, tc.max+1)})
			if !errors.Is(err, syscall.EINVAL) {
				t.Fatalf("Accept with %d bytes of private data: %v, want EINVAL", tc.max+1, err)
			}
			start := time.Now()
			ev, err := cch.Wait(timeout(t))
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			t.Logf("the peer's event after %v: %v, status %d (%v)", took.Round(time.Millisecond), ev.Type, ev.Status, ev.Err())
			if ev.Type != tc.want || tc.want == EventRejected && ev.Status != 28 {
				t.Errorf("the peer's event: %v, status %d; want %v%s", ev.Type, ev.Status, tc.want, map[bool]string{true: ", status 28"}[tc.want == EventRejected])
			}
			if tc.want == EventRejected {
				var rej *RejectError
				if !errors.As(ev.Err(), &rej) || rej.Reason != 28 {
					t.Errorf("the peer's error %v, want a *RejectError with reason 28", ev.Err())
				}
			}
			if took > time.Second {
				t.Errorf("the peer heard after %v, want within a second", took)
			}
			ev.Ack()
			if sqp != nil {
				if a, err := sqp.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPErr {
					t.Errorf("the refused QP: %v, %v; want ERR", a.State, err)
				}
			}
			if err := child.Accept(&ConnParam{}); err == nil {
				t.Error("a second Accept of the rejected request succeeded")
			}
			if err := child.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestNewIDUnknownPortSpace: a port space the kernel does not know is
// EINVAL, as librdmacm's rdma_create_id gets from it.
func TestNewIDUnknownPortSpace(t *testing.T) {
	ch := newChannel(t)
	if id, err := ch.NewID(PortSpace(0x0099)); !errors.Is(err, syscall.EINVAL) {
		if id != nil {
			id.Close()
		}
		t.Fatalf("NewID(0x99): %v, want EINVAL", err)
	}
}
