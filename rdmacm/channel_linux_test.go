package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// newChannel opens an EventChannel, closed when the test ends.
func newChannel(t testing.TB) *EventChannel {
	t.Helper()
	requireCM(t)
	ch, err := NewEventChannel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// expectEvent waits for the next event and fails unless it is typ.
func expectEvent(t testing.TB, ch *EventChannel, typ EventType) *Event {
	t.Helper()
	ev, err := ch.Wait(timeout(t))
	if err != nil {
		t.Fatalf("waiting for %v: %v", typ, err)
	}
	if ev.Type != typ {
		t.Fatalf("event %v (status %d, %v), want %v", ev.Type, ev.Status, ev.Err(), typ)
	}
	return ev
}

// TestIDCloseUnacked: an ID with an event handed out and not
// acknowledged does not close, says how many, and closes after the Ack.
func TestIDCloseUnacked(t *testing.T) {
	ch := newChannel(t)
	id, err := ch.NewID(PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(rxeIP, testPort(9)), time.Second); err != nil {
		t.Fatal(err)
	}
	ev := expectEvent(t, ch, EventAddrResolved)
	if ev.ID != id || ev.Status != 0 || ev.Err() != nil {
		t.Errorf("event %+v", ev)
	}
	err = id.Close()
	if !errors.Is(err, syscall.EBUSY) || !strings.Contains(err.Error(), "1 events not acknowledged") {
		t.Fatalf("close with an event not acknowledged: %v", err)
	}
	if err := ev.Ack(); err != nil {
		t.Fatal(err)
	}
	if err := ev.Ack(); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("second ack: %v", err)
	}
	if err := id.Close(); err != nil {
		t.Fatal(err)
	}
	if err := id.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second close: %v", err)
	}
	if err := id.Listen(1); !errors.Is(err, ErrClosed) {
		t.Errorf("listen after close: %v", err)
	}
}

// TestTryWaitAllocs: reading and acknowledging an event allocates
// nothing after warm-up.
func TestTryWaitAllocs(t *testing.T) {
	ch := newChannel(t)
	const n = 110
	for i := range n {
		id, err := ch.NewID(PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(rxeIP, testPort(10)), time.Second); err != nil {
			t.Fatalf("id %d: %v", i, err)
		}
	}
	// Wait until all are queued.
	deadline := time.Now().Add(stepWait)
	var got []*Event
	for len(got) < 5 {
		if ev, ok, err := ch.TryWait(); err != nil {
			t.Fatal(err)
		} else if ok {
			got = append(got, ev)
		} else if time.Now().After(deadline) {
			t.Fatal("no events")
		}
	}
	for _, ev := range got {
		ev.Ack()
	}
	time.Sleep(200 * time.Millisecond) // the rest resolve
	seen := 0
	allocs := testing.AllocsPerRun(100, func() {
		ev, ok, err := ch.TryWait()
		if err != nil || !ok {
			return
		}
		seen++
		ev.Ack()
	})
	if seen < 90 {
		t.Fatalf("only %d events in the loop", seen)
	}
	if allocs != 0 {
		t.Errorf("TryWait and Ack: %v allocations, want 0", allocs)
	}
}

// TestWaitEnds: Wait honours its context's deadline and wakes with
// ErrClosed when the channel closes.
func TestWaitEnds(t *testing.T) {
	ch := newChannel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := ch.Wait(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("wait past the deadline: %v", err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := ch.Wait(context.Background())
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	ch.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("wait when closed: %v", err)
		}
	case <-time.After(stepWait):
		t.Fatal("Close did not wake Wait")
	}
}

// TestLowLevelHandshake drives both sides by hand with QPs attached: the
// listener's CONNECT_REQUEST carries a new ID and the listener; the
// active side sees ESTABLISHED in place of CONNECT_RESPONSE; the passive
// side's comes after its Accept; then both disconnect.
func TestLowLevelHandshake(t *testing.T) {
	requireCM(t)
	ll := lowLevelRequest(t, PortSpaceTCP, 11, true, &ConnParam{PrivateData: []byte("low"), ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7})
	sch, cch, lid, cid, cqp, req := ll.sch, ll.cch, ll.lid, ll.cid, ll.cqp, ll.req
	if req.ListenID != lid || req.ID == nil || req.ID == lid || string(req.Param.PrivateData[:3]) != "low" || req.Param.QPNum != cqp.QPN() {
		t.Fatalf("connect request: id %p listen %p param %+v", req.ID, req.ListenID, req.Param)
	}
	child := req.ID
	if err := lid.Close(); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("listener close with the request not acknowledged: %v", err)
	}
	req.Ack()
	sqp := qpOn(t, child)
	if err := child.Accept(&ConnParam{PrivateData: []byte("yes"), ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	est := expectEvent(t, cch, EventEstablished)
	if est.Param.QPNum != sqp.QPN() || string(est.Param.PrivateData[:3]) != "yes" {
		t.Errorf("established: %+v", est.Param)
	}
	est.Ack()
	if a, err := cqp.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPRTS {
		t.Errorf("active QP %v, %v; want RTS", a.State, err)
	}
	expectEvent(t, sch, EventEstablished).Ack()
	if a, err := sqp.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPRTS {
		t.Errorf("passive QP %v, %v; want RTS", a.State, err)
	}
	if err := cid.Disconnect(); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, sch, EventDisconnected).Ack()
	if err := child.Disconnect(); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, cch, EventDisconnected).Ack()
	if a, err := cqp.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPErr {
		t.Errorf("active QP after disconnect %v, %v; want ERR", a.State, err)
	}
	for _, id := range []*ID{child, lid, cid} {
		if err := id.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestNotifyCommEst: a passive side told of its QP's first message
// (ID.Notify with uverbs.EventCommEst) is established before the active
// side's RTU, which an active ID without a QP sends only when it calls
// Establish; a second Notify is EISCONN, an event the CM does not act on
// EINVAL, and a closed ID ErrClosed.
func TestNotifyCommEst(t *testing.T) {
	requireCM(t)
	ll := lowLevelRequest(t, PortSpaceTCP, 97, false, &ConnParam{RetryCount: 7, RNRRetryCount: 7})
	sch, cch, cid := ll.sch, ll.cch, ll.cid
	child := ll.req.ID
	ll.req.Ack()
	sqp := qpOn(t, child)
	if err := child.Notify(uverbs.EventCommEst); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Notify before the reply: %v, want EINVAL", err)
	}
	if err := child.Accept(&ConnParam{ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	resp := expectEvent(t, cch, EventConnectResponse)
	if resp.Param.QPNum != sqp.QPN() {
		t.Errorf("connect response names QP %d, want %d", resp.Param.QPNum, sqp.QPN())
	}
	resp.Ack()
	if err := child.Notify(uverbs.EventPortActive); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Notify(%v): %v, want EINVAL", uverbs.EventPortActive, err)
	}
	if err := child.Notify(uverbs.EventCommEst); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, sch, EventEstablished).Ack()
	if err := child.Notify(uverbs.EventCommEst); !errors.Is(err, syscall.EISCONN) {
		t.Errorf("Notify when established: %v, want EISCONN", err)
	}
	// The active side's RTU now finds the passive side established.
	if err := cid.Establish(); err != nil {
		t.Fatal(err)
	}
	if err := child.Disconnect(); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, cch, EventDisconnected).Ack()
	if err := cid.Disconnect(); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, sch, EventDisconnected).Ack()
	for _, id := range []*ID{child, ll.lid, cid} {
		if err := id.Close(); err != nil {
			t.Error(err)
		}
	}
	if err := child.Notify(uverbs.EventCommEst); !errors.Is(err, ErrClosed) {
		t.Errorf("Notify after Close: %v, want ErrClosed", err)
	}
}

// qpOn makes an RC QP on the ID's shared PD and attaches it (INIT).
func qpOn(t testing.TB, id *ID) *uverbs.QP {
	t.Helper()
	pd, err := id.PD()
	if err != nil {
		t.Fatal(err)
	}
	c, err := pd.Context().NewCQ(cq.Config{Size: 16})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: c, RecvCQ: c, Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Close(); c.Close() })
	if err := id.AttachQP(qp); err != nil {
		t.Fatal(err)
	}
	if a, err := qp.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPInit {
		t.Fatalf("attached QP %v, %v; want INIT", a.State, err)
	}
	return qp
}

// TestRequestsNeverLeak: a request rejected, one accepted, one never
// answered and one whose event the listener's owner acknowledged and
// dropped; closing everything brings rxe0's cm_id and QP counts back.
func TestRequestsNeverLeak(t *testing.T) {
	requireCM(t)
	base := rdmatest.RXECounts(t)
	func() {
		l := listen(t, 12, nil)
		dials := make(chan error, 3)
		for range 3 {
			go func() {
				c, err := Dial(timeout(t), l.Addr().String(), nil)
				if err == nil {
					c.Close()
				}
				dials <- err
			}()
		}
		r1, err := l.AcceptRequest(timeout(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := r1.Reject([]byte("no")); err != nil {
			t.Fatal(err)
		}
		r2, err := l.AcceptRequest(timeout(t))
		if err != nil {
			t.Fatal(err)
		}
		c2, err := r2.Accept(timeout(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AcceptRequest(timeout(t)); err != nil { // the third, never answered
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		var rejected, ok int
		for range 3 {
			err := <-dials
			var rej *RejectError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &rej):
				rejected++
			default:
				t.Errorf("dial: %v", err)
			}
		}
		if ok != 1 || rejected != 2 {
			t.Errorf("%d connected, %d rejected; want 1 and 2", ok, rejected)
		}
		c2.Close()
	}()
	// The low level: a request acknowledged, never answered, and its
	// listener closed.
	ch := newChannel(t)
	lid, err := ch.NewID(PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := lid.Bind(netip.AddrPortFrom(rxeIP, testPort(13))); err != nil {
		t.Fatal(err)
	}
	if err := lid.Listen(1); err != nil {
		t.Fatal(err)
	}
	dialed := make(chan error, 1)
	go func() {
		_, err := Dial(timeout(t), netip.AddrPortFrom(rxeIP, testPort(13)).String(), nil)
		dialed <- err
	}()
	expectEvent(t, ch, EventConnectRequest).Ack()
	if err := lid.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-dialed; !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial to a dropped request: %v, want refused", err)
	}
	waitCounts(t, map[string]uint64{"cm_id": base["cm_id"], "qp": base["qp"], "cq": base["cq"]})
}

// TestDialDeadline: an address on rxe0's subnet that nobody has resolves
// (the dummy netdev does no ARP) and the request goes unanswered: Dial
// ends at its context's deadline, not the CM's minute.
func TestDialDeadline(t *testing.T) {
	requireCM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := Dial(ctx, "192.0.2.77:7471", nil)
	d := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("dial to nobody: %v after %v, want the deadline", err, d)
	}
	if d > 5*time.Second {
		t.Errorf("returned after %v, deadline 1 s", d)
	}
	t.Logf("%v after %v", err, d)
}

// TestDialNoDevice: an address no RDMA device reaches is refused with a
// clear error.
func TestDialNoDevice(t *testing.T) {
	requireCM(t)
	_, err := Dial(timeout(t), "198.51.100.7:7471", nil)
	var oe *OpError
	if err == nil || !errors.As(err, &oe) || oe.Op != "resolve addr" {
		t.Fatalf("dial to an unreachable network: %v", err)
	}
	t.Log(err)
}
