package conformance

// Tests for the completion-queue rows of shared/docs/pitfalls.md: bugs
// users of other RDMA libraries hit, which goverbs must not have.

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

// "Arm is one-shot; code that polls, then arms, but does not poll again
// loses the CQEs that arrived in between": a completion raced against
// the arm is never lost by arm → poll until empty → wait.
func TestPitfallArmRace(t *testing.T) {
	f := setup(t)
	scq, rcq := f.newCQ(t, 64), f.newCQ(t, 64)
	a, _ := f.rcPair(t, scq, scq, rcq, rcq)
	wcs := make([]cq.WC, 8)
	sge := rdmatest.SGE(t, f.mr, 0, 8)
	for i := 0; i < 300; i++ {
		go func(i int) { // races the arm below
			if _, err := a.PostSend([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{sge}, RemoteAddr: f.mr.Addr() + 4096, RKey: f.mr.RKey()}}); err != nil {
				t.Error(err)
			}
		}(i)
		if i%3 == 0 {
			time.Sleep(time.Duration(i%5) * 100 * time.Microsecond)
		}
		if err := scq.ReqNotify(cq.NextCompletion); err != nil {
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
				c, ok, err := f.ch.TryWait()
				if !ok || err != nil {
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
		c, ok, err := f.ch.TryWait()
		if !ok || err != nil {
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

// "Edge-triggered epoll: consuming one event per readiness hangs": no
// event is stranded in the fd. A Wait that finds events queued takes one
// (one read, as ibv_get_cq_event), and the next Waits take the rest at
// once, with no new readiness to wake them; a Wait parked when several
// come returns, and the rest follow the same way. (That a wake-up reads
// every queued event is cq's TestWakeUpReadsEveryEvent: rxe cannot queue
// three events at one instant.)
func TestPitfallNoEventStranded(t *testing.T) {
	f := setup(t)
	cqs := []*cq.CQ{f.newCQ(t, 16), f.newCQ(t, 16), f.newCQ(t, 16)}
	peer := f.newCQ(t, 16)
	var qps []*uverbs.QP
	for _, q := range cqs {
		a, _ := f.rcPair(t, q, q, peer, peer)
		qps = append(qps, a)
	}
	fire := func() {
		for _, q := range cqs {
			if err := q.ReqNotify(cq.NextCompletion); err != nil {
				t.Fatal(err)
			}
		}
		for i, a := range qps {
			f.send(t, a, uint64(i), uverbs.WRRDMAWrite, 0)
		}
	}
	// takeAll takes the three events, first the one Wait got (nil: none
	// yet), each CQ's once, and leaves nothing behind.
	takeAll := func(what string, first *cq.CQ) {
		t.Helper()
		got := map[*cq.CQ]bool{}
		for len(got) < len(cqs) {
			c := first
			if c == nil {
				c = f.wait(t) // a stranded event fails it, after 10 s
			}
			first = nil
			if got[c] {
				t.Fatalf("%s: CQ %d's event came twice", what, c.EventHandle())
			}
			got[c] = true
			c.Ack(1)
		}
		f.noEvent(t, what+": three events, three deliveries")
	}

	// Queued before the Wait: each Wait reads one.
	fire()
	for _, q := range cqs {
		rdmatest.PollN(t, q, 1)
	}
	c := f.wait(t)
	// 6.1's rxe queues the event from a tasklet after the CQE: poll(2)
	// waits for the later ones, should they not be queued yet.
	pfd := []unix.PollFd{{Fd: int32(f.ch.FD()), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 2000); err != nil || n != 1 {
		t.Errorf("after one Wait with three events queued, the fd polls %d (%v): want the other two left in it (one read an event)", n, err)
	}
	takeAll("queued before the Wait", c)

	// A Wait parked when they come.
	done := make(chan *cq.CQ, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, _ := f.ch.Wait(ctx)
		done <- c
	}()
	time.Sleep(20 * time.Millisecond) // most likely parked by now; either way, nothing may be lost
	fire()
	first := <-done
	if first == nil {
		t.Fatal("the parked Wait got no event in 10 s")
	}
	takeAll("a parked Wait", first)
	for _, q := range cqs {
		rdmatest.PollN(t, q, 1)
	}
}

// "Acking every event is the bottleneck": Ack is one atomic operation
// and allocates nothing. Acking more than was delivered is refused, so
// it banks no credit against later events.
func TestPitfallAckIsCheap(t *testing.T) {
	f := setup(t)
	q := f.newCQ(t, 16)
	a, _ := f.rcPair(t, q, q, q, q)
	const events = 10
	for i := range events {
		if err := q.ReqNotify(cq.NextCompletion); err != nil {
			t.Fatal(err)
		}
		f.send(t, a, uint64(i), uverbs.WRRDMAWrite, 0)
		if c := f.wait(t); c != q {
			t.Fatalf("event for CQ %d", c.EventHandle())
		}
		rdmatest.PollN(t, q, 1)
	}
	if n := testing.AllocsPerRun(events-1, func() { q.Ack(1) }); n != 0 {
		t.Errorf("Ack allocates %v times", n)
	}
	if err := q.Ack(1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Ack with every event acknowledged: %v, want EINVAL", err)
	}
	if q.Unacked() != 0 {
		t.Errorf("Unacked = %d, want 0", q.Unacked())
	}
}
