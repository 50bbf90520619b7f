package conformance

// Tests for the completion-queue rows of shared/docs/pitfalls.md: bugs
// users of other RDMA libraries hit, which goverbs must not have.

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// "Arm is one-shot; code that polls, then arms, but does not poll again
// loses the CQEs that arrived in between": a completion raced against
// the arm is never lost by arm → poll until empty → wait.
func TestPitfallArmRace(t *testing.T) {
	f := setup(t)
	scq, rcq := f.newCQ(t, 64), f.newCQ(t, 64)
	a, _ := f.rcPair(t, scq, scq, rcq, rcq)
	wcs := make([]cq.WC, 8)
	for i := 0; i < 300; i++ {
		go func(i int) { // races the arm below
			if _, err := a.PostSend([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{f.mr.SGE(0, 8)}, RemoteAddr: f.mr.Addr() + 4096, RKey: f.mr.RKey()}}); err != nil {
				t.Error(err)
			}
		}(i)
		if i%3 == 0 {
			time.Sleep(time.Duration(i%5) * 100 * time.Microsecond)
		}
		if err := scq.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		got := 0
		for {
			n, err := scq.Poll(wcs)
			if err != nil {
				t.Fatal(err)
			}
			got += n
			if n == 0 {
				break
			}
		}
		if got > 0 {
			// The poll found it; if it landed after the arm, an event
			// also comes, which the next iterations take.
			for {
				c, err := f.ch.TryWait()
				if err != nil {
					break
				}
				c.Ack(1)
			}
			continue
		}
		// Not there yet: it lands after the arm, so an event must come.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := f.ch.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatalf("iteration %d: the completion was lost: no CQE and no event (%v)", i, err)
		}
		c.Ack(1)
		rdmatest.PollN(t, scq, 1)
	}
	time.Sleep(20 * time.Millisecond)
	for {
		c, err := f.ch.TryWait()
		if err != nil {
			break
		}
		c.Ack(1)
	}
}

// "rxe consumer index advanced once too often after an empty poll":
// alternating empty and non-empty polls count every completion.
func TestPitfallAlternatingEmptyPolls(t *testing.T) {
	f := setup(t)
	scq, rcq := f.newCQ(t, 8), f.newCQ(t, 8)
	a, _ := f.rcPair(t, scq, scq, rcq, rcq)
	wcs := make([]cq.WC, 4)
	for i := 0; i < 500; i++ {
		if n, _ := scq.Poll(wcs); n != 0 {
			t.Fatalf("iteration %d: %d completions in an empty CQ", i, n)
		}
		f.send(t, a, uint64(i), uverbs.WRRDMAWrite, 0)
		w := rdmatest.PollN(t, scq, 1)[0]
		if w.WRID != uint64(i) {
			t.Fatalf("iteration %d: wr_id %d", i, w.WRID)
		}
	}
}

// "Soft-RoCE drops completions when many QPs drive it at once": many QPs
// into one CQ, every completion counted.
func TestPitfallManyQPsOneCQ(t *testing.T) {
	rdmatest.SkipUnless(t, "rxe", "it posts 100 sends per QP into 64-deep send queues without polling; "+
		"rxe frees a send slot when the kernel completes the WQE, mlx5 only when its completion is polled")
	f := setup(t)
	shared, peers := f.newCQ(t, 4096), f.newCQ(t, 4096)
	const pairs, each = 16, 100
	qps := make([]*uverbs.QP, pairs)
	for i := range qps {
		qps[i], _ = f.rcPair(t, shared, shared, peers, peers)
	}
	for round := 0; round < each; round++ {
		for i, qp := range qps {
			f.send(t, qp, uint64(i*each+round), uverbs.WRRDMAWrite, 0)
		}
		if round%16 == 15 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	seen := make(map[uint64]bool, pairs*each)
	for _, w := range rdmatest.PollN(t, shared, pairs*each) {
		if w.Status != cq.Success || seen[w.WRID] {
			t.Fatalf("completion %+v (seen before: %v)", w, seen[w.WRID])
		}
		seen[w.WRID] = true
	}
}

// "Edge-triggered epoll: consuming one event per readiness hangs": one
// wake-up reads every queued event, so the fd is left empty.
func TestPitfallWakeUpReadsAll(t *testing.T) {
	f := setup(t)
	cqs := []*cq.CQ{f.newCQ(t, 16), f.newCQ(t, 16), f.newCQ(t, 16)}
	peer := f.newCQ(t, 16)
	var qps []*uverbs.QP
	for _, q := range cqs {
		a, _ := f.rcPair(t, q, q, peer, peer)
		qps = append(qps, a)
		if err := q.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range qps {
		f.send(t, a, uint64(i), uverbs.WRRDMAWrite, 0)
	}
	for _, q := range cqs {
		rdmatest.PollN(t, q, 1)
	}
	f.wait(t).Ack(1)
	var b [8]byte
	if _, err := unix.Read(f.ch.FD(), b[:]); err != unix.EAGAIN {
		t.Errorf("after one Wait, the fd still held an event (read: %v)", err)
	}
	for i := 0; i < 2; i++ {
		c, err := f.ch.TryWait()
		if err != nil {
			t.Fatalf("event %d of 3 is lost: %v", i+2, err)
		}
		c.Ack(1)
	}
	f.noEvent(t, "three events, three deliveries")
}

// "Acking every event is the bottleneck": Ack is one atomic add.
func TestPitfallAckIsCheap(t *testing.T) {
	f := setup(t)
	q := f.newCQ(t, 4)
	if n := testing.AllocsPerRun(1000, func() { q.Ack(1) }); n != 0 {
		t.Errorf("Ack allocates %v times", n)
	}
	if q.Unacked() != 0 {
		t.Errorf("acks beyond the delivered events count as debt: Unacked = %d", q.Unacked())
	}
}
