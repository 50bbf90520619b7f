package rdmacm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

func TestEventTypeString(t *testing.T) {
	for typ, want := range map[EventType]string{
		EventAddrResolved: "ADDR_RESOLVED", EventConnectRequest: "CONNECT_REQUEST",
		EventRejected: "REJECTED", EventTimewaitExit: "TIMEWAIT_EXIT", 99: "EventType(99)",
	} {
		if got := typ.String(); got != want {
			t.Errorf("%d: %q, want %q", uint32(typ), got, want)
		}
	}
	for i := range uint32(16) { // every event the kernel sends has a name
		if s := EventType(i).String(); strings.HasPrefix(s, "EventType(") {
			t.Errorf("event %d has no name: %q", i, s)
		}
	}
}

func TestPrivateDataLimits(t *testing.T) {
	for _, tc := range []struct {
		ps  PortSpace
		msg string
		max int
	}{
		{PortSpaceTCP, "connect", 56}, {PortSpaceIB, "connect", 92},
		{PortSpaceTCP, "accept", 196}, {PortSpaceTCP, "reject", 148},
	} {
		if err := checkPrivateData(tc.ps, tc.msg, make([]byte, tc.max)); err != nil {
			t.Errorf("%v %s at the limit: %v", tc.ps, tc.msg, err)
		}
		if err := checkPrivateData(tc.ps, tc.msg, make([]byte, tc.max+1)); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%v %s one byte over: %v", tc.ps, tc.msg, err)
		}
	}
}

func TestStatusErr(t *testing.T) {
	err := statusErr(EventRejected, 28, []byte("why"))
	var rej *RejectError
	if !errors.As(err, &rej) || rej.Reason != 28 || !bytes.Equal(rej.PrivateData, []byte("why")) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("rejected: %v", err)
	}
	if err := statusErr(EventUnreachable, -int(syscall.ETIMEDOUT), nil); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("unreachable: %v", err)
	}
	if err := statusErr(EventAddrError, 0, nil); !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Errorf("addr error: %v", err)
	}
	if err := statusErr(EventEstablished, 0, nil); err != nil {
		t.Errorf("established: %v", err)
	}
	if err := ctxErr(context.DeadlineExceeded); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("deadline: %v", err)
	}
	if err := ctxErr(context.Canceled); err != context.Canceled {
		t.Errorf("canceled: %v", err)
	}
}

// TestQPAttrFromKernel converts the attributes rxe's INIT_QP_ATTR gives
// for RTR on 6.12 and refuses what uverbs cannot carry.
func TestQPAttrFromKernel(t *testing.T) {
	k := uapi.IBUverbsQPAttr{QPState: 2, PathMTU: 3, RqPSN: 0x1234, DestQPNum: 17, MaxDestRdAtomic: 4, MinRnrTimer: 12}
	k.AHAttr.Grh.Dgid[15] = 1
	k.AHAttr.Grh.SgidIndex, k.AHAttr.Grh.HopLimit, k.AHAttr.IsGlobal, k.AHAttr.PortNum = 1, 64, 1, 1
	const rtr = 1<<0 | 1<<7 | 1<<8 | 1<<12 | 1<<17 | 1<<15 | 1<<20 // STATE|AV|PATH_MTU|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER|DEST_QPN
	a, m, err := qpAttrFromKernel(&k, rtr, false)
	if err != nil {
		t.Fatal(err)
	}
	want := uverbs.QPAttr{State: uverbs.QPRTR, PathMTU: uverbs.MTU1024, RQPSN: 0x1234, DestQPN: 17, MaxDestRdAtomic: 4, MinRNRTimer: 12,
		AH: uverbs.AHAttr{GRH: uverbs.GlobalRoute{DGID: uverbs.GID{15: 1}, SGIDIndex: 1, HopLimit: 64}, IsGlobal: true, Port: 1}}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("converted (-want +got):\n%s", diff)
	}
	if m != rtr {
		t.Errorf("mask %#x, want %#x", m, rtr)
	}
	// Bits 21-24 go on InfiniBand's RTR, and are refused elsewhere.
	if _, m, err := qpAttrFromKernel(&k, rtr|1<<21, true); err != nil || m != rtr {
		t.Errorf("InfiniBand RTR with bit 21: mask %#x, %v", m, err)
	}
	for _, bit := range []uint32{1 << 2, 1 << 14, 1 << 18, 1 << 19, 1 << 21} {
		if _, _, err := qpAttrFromKernel(&k, rtr|bit, false); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("bit %#x: %v, want EINVAL", bit, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	d := (*Config)(nil).withDefaults()
	if d.Cap.MaxSendWR != 64 || d.Cap.MaxRecvWR != 64 || d.CQSize != 128 || d.RetryCount != 7 || d.RNRRetryCount != 7 ||
		d.Backlog != 128 || d.CloseWait <= 0 || d.Cap.MaxSendSGE != 1 {
		t.Errorf("defaults: %+v", d)
	}
	d = (&Config{CQSize: 5, Cap: uverbs.QPCap{MaxSendWR: 2}}).withDefaults()
	if d.CQSize != 5 || d.Cap.MaxSendWR != 2 {
		t.Errorf("kept: %+v", d)
	}
}

func TestResolveHost(t *testing.T) {
	ctx := context.Background()
	if ap, err := resolveHost(ctx, "192.0.2.1:7471", false); err != nil || ap.String() != "192.0.2.1:7471" {
		t.Errorf("%v %v", ap, err)
	}
	if ap, err := resolveHost(ctx, ":7471", true); err != nil || ap.String() != "0.0.0.0:7471" {
		t.Errorf("wildcard: %v %v", ap, err)
	}
	for _, bad := range []string{":7471", "192.0.2.1", "192.0.2.1:x", "192.0.2.1:70000"} {
		if _, err := resolveHost(ctx, bad, false); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
