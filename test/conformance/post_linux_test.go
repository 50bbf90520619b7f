package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// Compare-and-swap, and a send gathered from three SGEs into a receive
// scattered over two.
func TestCompareSwapAndSGELists(t *testing.T) {
	f := setup(t)
	scq, rcq := f.newCQ(t, 16), f.newCQ(t, 16)
	qp := func(send, recv *cq.CQ) *uverbs.QP {
		q, err := f.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: send, RecvCQ: recv,
			Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 3, MaxRecvSGE: 2}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	a, b := qp(scq, scq), qp(rcq, rcq)
	rdmatest.ConnectRC(t, a, b)
	m := f.mem
	order := rdmatest.AtomicOrder(t) // the byte order the device's atomics see memory in
	order.PutUint64(m[8192:], 7)
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRAtomicCmpSwp, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 100, 8)}, RemoteAddr: f.mr.Addr() + 8192, RKey: f.mr.RKey(), CompareAdd: 7, Swap: 99}}); err != nil {
		t.Fatal(err)
	}
	if w := rdmatest.PollN(t, scq, 1)[0]; w.Status != cq.Success || w.Opcode != cq.OpCompSwap {
		t.Fatalf("compare-and-swap completion %+v", w)
	}
	if old, now := order.Uint64(m[100:]), order.Uint64(m[8192:]); old != 7 || now != 99 {
		t.Errorf("compare-and-swap: old %d, now %d; want 7, 99", old, now)
	}
	copy(m[1000:], "abc")
	copy(m[2000:], "defg")
	copy(m[3000:], "hi")
	if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 2, SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 5000, 4), rdmatest.SGE(t, f.mr, 6000, 16)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 3, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendFence,
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 1000, 3), rdmatest.SGE(t, f.mr, 2000, 4), rdmatest.SGE(t, f.mr, 3000, 2)}}}); err != nil {
		t.Fatal(err)
	}
	if w := rdmatest.PollN(t, rcq, 1)[0]; w.Status != cq.Success || w.ByteLen != 9 {
		t.Fatalf("receive %+v", w)
	}
	if got := string(m[5000:5004]) + string(m[6000:6005]); got != "abcdefghi" {
		t.Errorf("scattered receive %q, want abcdefghi", got)
	}
	rdmatest.PollN(t, scq, 1)
}

// A full send queue gives ENOMEM, after posting what fits; nothing is
// lost.
func TestSendQueueFull(t *testing.T) {
	f := setup(t)
	scq, rcq := f.newCQ(t, 1024), f.newCQ(t, 16)
	a, _ := f.rcPair(t, scq, scq, rcq, rcq)
	wrs := make([]uverbs.SendWR, 1000)
	for i := range wrs {
		wrs[i] = uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 8)}, RemoteAddr: f.mr.Addr() + 4096, RKey: f.mr.RKey()}
	}
	n, err := a.PostSend(wrs)
	if !errors.Is(err, unix.ENOMEM) || n < 64 || n >= len(wrs) {
		t.Fatalf("PostSend of 1000 into a 64-deep queue = %d, %v; want ENOMEM after at least 64", n, err)
	}
	t.Logf("posted %d: %v", n, err)
	for i, w := range rdmatest.PollN(t, scq, n) {
		if w.WRID != uint64(i) || w.Status != cq.Success {
			t.Fatalf("completion %d: %+v", i, w)
		}
	}
}

// Posting, polling, arming and taking an event allocate nothing.
func TestHotPathsAllocateNothing(t *testing.T) {
	f := setup(t)
	scq, rcq := f.newCQ(t, 4096), f.newCQ(t, 4096)
	a, b := f.rcPair(t, scq, scq, rcq, rcq)
	send := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 8)}}}
	recv := []uverbs.RecvWR{{SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 65536, 64)}}}
	wcs := make([]cq.WC, 64)
	drain := func() {
		for _, q := range []*cq.CQ{scq, rcq} {
			for n, _ := q.Poll(wcs); n > 0; n, _ = q.Poll(wcs) {
			}
		}
	}
	if n := testing.AllocsPerRun(50, func() {
		b.PostRecv(recv)
		a.PostSend(send)
	}); n != 0 {
		t.Errorf("PostRecv+PostSend allocate %v times", n)
	}
	rdmatest.PollN(t, scq, 51)
	drain()
	for i := 0; i < 2; i++ { // AllocsPerRun calls Wait twice: queue two events
		if i == 1 {
			f.queued(t) // the second arm comes after the first event, before it is read
		}
		if err := scq.ReqNotify(cq.NextCompletion); err != nil {
			t.Fatal(err)
		}
		b.PostRecv(recv)
		a.PostSend(send)
		rdmatest.PollN(t, scq, 1)
	}
	// A Wait that finds its event queued never parks, so a deadline costs
	// it nothing; it keeps a missing event from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n := testing.AllocsPerRun(1, func() {
		c, err := f.ch.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.Ack(1)
	}); n != 0 {
		t.Errorf("Wait with a queued event allocates %v times", n)
	}
}
