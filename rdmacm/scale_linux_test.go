package rdmacm

import (
	"runtime"
	"testing"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// cmDevice is the rdma_cm device, as /proc/self/fd names an event
// channel's file.
const cmDevice = "/dev/infiniband/rdma_cm"

// smallCap is cmtime's QP: one request of one SGE each way.
var smallCap = uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}

// TestThousandConnections holds 1,000 accepted connections (and their
// 1,000 dialed peers, in the same process) open at once: they share the
// package's one rdma_cm channel, beside the listener's, and with
// Config.CQ one CQ, so the process holds a handful of files for them
// all, not one or two per connection. Under the race detector, which
// looks for races and not for files, 200 (12 s against 25 s).
func TestThousandConnections(t *testing.T) {
	requireCM(t)
	vctx := rdmatest.Open(t)
	pd, err := vctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	shared, err := vctx.NewCQ(cq.Config{Size: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	cfg := &Config{PD: pd, CQ: shared, Cap: smallCap, Backlog: 64}
	l := listen(t, 14, cfg)
	fds, cms := testutil.OpenFDs(t), testutil.FDsTo(t, cmDevice)
	n := 1000
	if testutil.Race {
		n = 200
	}
	conns := make([]*Conn, 0, 2*n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		c, s := dialAccept(t, l, cfg)
		conns = append(conns, c, s)
		if s.CQ() != shared || s.CompChannel() != nil {
			t.Fatalf("connection %d: CQ %p, channel %p; want Config.CQ %p and its channel, none", i, s.CQ(), s.CompChannel(), shared)
		}
	}
	gotFDs, gotCMs := testutil.OpenFDs(t), testutil.FDsTo(t, cmDevice)
	t.Logf("%d connections open: %d fds (%d before), %d of them rdma_cm (%d before)", len(conns), gotFDs, fds, gotCMs, cms)
	if gotCMs > cms+1 {
		t.Errorf("%d rdma_cm files with %d connections open, %d before: want at most one more (the connections' shared one)", gotCMs, len(conns), cms)
	}
	if gotFDs > fds+4 {
		t.Errorf("%d files with %d connections open, %d before: want a few more at most", gotFDs, len(conns), fds)
	}
	for _, c := range conns {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	conns = nil
	if got := testutil.FDsTo(t, cmDevice); got != cms {
		t.Errorf("%d rdma_cm files once all are closed, %d before", got, cms)
	}
}

// dialAcceptAllocs bounds the objects a connection allocates, both sides
// in one process: Dial and Accept, each with the connection's own CQ and
// channel, then both Closes. Measured: 97 on 6.1/amd64 (the Conns, IDs
// and events, the CQs, channels and QPs, the test's contexts and timers);
// the bound leaves room for another kernel's or architecture's paths.
const dialAcceptAllocs = 115

// TestDialAcceptAllocs holds a connection's allocations to
// dialAcceptAllocs.
func TestDialAcceptAllocs(t *testing.T) {
	requireCM(t)
	l := listen(t, 15, &Config{Cap: smallCap})
	c0, s0 := pair(t, l, &Config{Cap: smallCap}) // the device, hub and goroutines warm
	defer c0.Close()
	defer s0.Close()
	avg := testing.AllocsPerRun(20, func() {
		c, s := dialAccept(t, l, &Config{Cap: smallCap})
		c.Close()
		s.Close()
	})
	t.Logf("%.0f allocations a connection (Dial, Accept and both Closes), GOARCH %s", avg, runtime.GOARCH)
	if avg > dialAcceptAllocs {
		t.Errorf("%.0f allocations a connection, want at most %d", avg, dialAcceptAllocs)
	}
}
