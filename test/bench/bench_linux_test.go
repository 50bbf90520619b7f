package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

type env struct {
	ctx      *uverbs.Context
	pd       *uverbs.PD
	ch       *cq.Channel
	scq, rcq *cq.CQ
	a, b     *uverbs.QP
	mr       *uverbs.MR
	sge      uverbs.SGE // 8 bytes at the start of mr
	buf      *uverbs.Buffer
}

// setup makes the benchmarks' device objects.
func setup(b *testing.B) *env {
	b.Helper()
	e := &env{ctx: rdmatest.Open(b)}
	var err error
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	e.pd, err = e.ctx.AllocPD()
	must(err)
	e.ch, err = e.ctx.NewCompChannel()
	must(err)
	e.scq, err = e.ctx.NewCQ(cq.Config{Size: 4096, Channel: e.ch})
	must(err)
	e.rcq, err = e.ctx.NewCQ(cq.Config{Size: 4096, Channel: e.ch})
	must(err)
	cfg := uverbs.QPConfig{Type: uverbs.RC, SendCQ: e.scq, RecvCQ: e.rcq,
		Cap: uverbs.QPCap{MaxSendWR: 1024, MaxRecvWR: 1024, MaxSendSGE: 1, MaxRecvSGE: 1}}
	e.a, err = e.pd.NewQP(cfg)
	must(err)
	e.b, err = e.pd.NewQP(cfg)
	must(err)
	rdmatest.ConnectRC(b, e.a, e.b)
	e.buf, err = uverbs.AllocBuffer(1 << 16)
	must(err)
	e.mr, err = e.pd.RegMR(e.buf.Bytes(), rdmatest.AllAccess)
	must(err)
	e.sge = rdmatest.SGE(b, e.mr, 0, 8)
	b.Cleanup(func() {
		e.a.Close()
		e.b.Close()
		for _, q := range []*cq.CQ{e.scq, e.rcq} {
			q.Ack(q.Unacked())
			q.Close()
		}
		e.ch.Close()
		e.mr.Close()
		e.buf.Close()
		e.pd.Close()
	})
	// A collection now, outside the timer, so that none runs in the
	// measured loop: the setup's allocations (the device opened, sysfs
	// and netlink read, the test framework's own) may have started a
	// cycle, whose marking would then share the loop's one P with it.
	// The loops allocate nothing, so none starts there. Counted under
	// -qemuicount, a cycle that overlaps PostPoll's loop adds about 330
	// instructions a message (2.3 %) to a figure rdma-core's twin, with
	// no collector, never pays.
	runtime.GC()
	return e
}

func (e *env) write(n int) []uverbs.SendWR {
	wrs := make([]uverbs.SendWR, n)
	for i := range wrs {
		wrs[i] = uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{e.sge}, RemoteAddr: e.mr.Addr() + 4096, RKey: e.mr.RKey()}
	}
	return wrs
}

// fill posts signaled writes and gives loopback rxe time to complete them
// all (the ring cannot be peeked without taking the completions). It
// waits busy, as cbench.c does: a sleep would make the drain start with a
// wakeup, which in Go also wakes a second thread to look for work (the
// runtime's spinning M), and that thread, on the VM's other vCPU, slows
// the drain it has nothing to do with.
func (e *env) fill(b *testing.B, wrs []uverbs.SendWR, settle time.Duration) {
	// One request a post: one doorbell for them all would be a write of
	// millions of instructions, long enough for the runtime's monitor to
	// hand the P off and stay awake into the timed drain.
	for i := range wrs {
		if _, err := e.a.PostSend(wrs[i : i+1]); err != nil {
			b.Fatal(err)
		}
	}
	for start := time.Now(); time.Since(start) < settle; {
	}
}

func BenchmarkPollEmpty(b *testing.B) {
	e := setup(b)
	wcs := make([]cq.WC, 16)
	b.ReportAllocs()
	for b.Loop() {
		e.scq.Poll(wcs)
	}
}

// Poll per CQE: drain a CQ holding 256 completions in batches, as
// testdata/cbench.c does through libibverbs, with the same rule for when
// to stop: at least 100 ms of draining, or 500 rounds. A round in which
// a poll found the CQ empty waited for rxe, not for the poll: it is left
// out, and the next round gives rxe longer.
//
// The whole procedure is one b.Loop iteration, timed around each drain
// (ns/CQE; ns/op counts the fills too). Stopping the benchmark timer for
// each fill would not do: with -benchmem, StopTimer reads the memory
// statistics, which stops the world, and the drain after it would run
// beside a thread the restart woke on the VM's other vCPU.
func BenchmarkPollDrain(b *testing.B) {
	for _, batch := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			e := setup(b)
			wrs := e.write(256)
			wcs := make([]cq.WC, batch)
			settle := 2 * time.Millisecond
			// A round outside the figures first, as in cbench.c: it also
			// sizes the QP's request buffer, which b.N = 1 would count.
			e.fill(b, wrs, settle)
			rdmatest.PollN(b, e.scq, len(wrs))
			b.ReportAllocs()
			var cqes, rounds, dirty int
			var took time.Duration
			for b.Loop() {
				for took < 100*time.Millisecond && rounds < 500 {
					e.fill(b, wrs, settle)
					start := time.Now()
					empty, err := drain(e.scq, wcs, len(wrs))
					d := time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
					rounds++
					if empty {
						dirty++
						settle = min(2*settle, 64*time.Millisecond)
						continue
					}
					took += d
					cqes += len(wrs)
				}
			}
			if cqes > 0 {
				b.ReportMetric(float64(took.Nanoseconds())/float64(cqes), "ns/CQE")
			}
			if dirty > 0 {
				b.Logf("%d of %d rounds found the CQ empty and were left out", dirty, rounds)
			}
		})
	}
}

// drain polls c in batches of len(wcs) until it has taken want
// completions, and reports whether a poll found it empty: cbench.c's
// drain loop, in a function of its own as that loop is in C. Inline in
// pollDrain's closure, the loop would keep its count, its flag and the
// error in the closure's frame, storing and reloading them around every
// poll: nine instructions a call more (counted under -qemuicount), most
// of them memory accesses that cbench's loop does not make, charged to
// every CQE at batch 1. What is left is what Go's calling convention
// spills across a call (it has no callee-saved registers): the count,
// and the arguments reloaded. A poll that finds
// the CQ empty spoils the round, which pollDrain leaves out, so the
// rest of such a round is taken by a second loop, and the first keeps
// no flag.
//
//go:noinline
func drain(c *cq.CQ, wcs []cq.WC, want int) (empty bool, err error) {
	for got := 0; got < want; {
		n, err := c.Poll(wcs)
		if err != nil {
			return false, err
		}
		if n == 0 {
			return true, drainRest(c, wcs, want-got)
		}
		got += n
	}
	return false, nil
}

// drainRest takes want more completions from c, for drain.
func drainRest(c *cq.CQ, wcs []cq.WC, want int) error {
	for got := 0; got < want; {
		n, err := c.Poll(wcs)
		if err != nil {
			return err
		}
		got += n
	}
	return nil
}

func BenchmarkReqNotify(b *testing.B) {
	e := setup(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := e.scq.ReqNotify(cq.NextCompletion); err != nil {
			b.Fatal(err)
		}
	}
}

// An event round trip: arm, post, wake on the channel, ack, poll.
func BenchmarkEventRoundTrip(b *testing.B) {
	e := setup(b)
	wr := e.write(1)
	wcs := make([]cq.WC, 4)
	bg := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := e.scq.ReqNotify(cq.NextCompletion); err != nil {
			b.Fatal(err)
		}
		if _, err := e.a.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		c, err := e.ch.Wait(bg)
		if err != nil {
			b.Fatal(err)
		}
		c.Ack(1)
		for n := 0; n == 0; {
			if n, err = c.Poll(wcs); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// A latency tool's step on one side: post one signaled write (one
// doorbell) and poll, busy, until its completion, as goverbs perf and
// perftest's latency tests do for every message they send. Under
// -qemuicount the C and Go figures count what each side executes per
// message, the kernel's work included, which a latency pair's timing
// cannot show.
func BenchmarkPostPoll(b *testing.B) {
	e := setup(b)
	wr := e.write(1)
	wcs := make([]cq.WC, 1)
	b.ReportAllocs()
	polls, posts := 0, 0
	for b.Loop() {
		if _, err := e.a.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		posts++
		for n := 0; n == 0; polls++ {
			var err error
			if n, err = e.scq.Poll(wcs); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(polls)/float64(posts), "polls/op")
}

// PostSend per work request, in batches of 32 (one doorbell each): ns/WR
// is timed around PostSend alone; reaping the completions is not in it.
func BenchmarkPostSend(b *testing.B) {
	e := setup(b)
	wrs := e.write(32)
	wcs := make([]cq.WC, 64)
	b.ReportAllocs()
	var posted int
	var took time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := e.a.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		took += time.Since(start)
		posted += len(wrs)
		for got := 0; got < len(wrs); {
			n, err := e.scq.Poll(wcs)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(posted), "ns/WR")
}

// PostRecv per work request: no system call. ns/WR leaves out the QP
// swaps (see PollDrain on why the timer is not stopped).
func BenchmarkPostRecv(b *testing.B) {
	e := setup(b)
	wr := []uverbs.RecvWR{{SGL: []uverbs.SGE{rdmatest.SGE(b, e.mr, 8192, 64)}}}
	// The receive queue holds 1024: a fresh QP every 1000 posts keeps it
	// from filling, outside ns/WR. It goes to INIT as in cbench.c
	// (rdma-core refuses receives in RESET).
	b.ReportAllocs()
	n, posted := 0, 0
	var swaps time.Duration
	start := time.Now()
	for b.Loop() {
		if n == 1000 {
			t := time.Now()
			e.b.Close()
			qp, err := e.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: e.scq, RecvCQ: e.rcq,
				Cap: uverbs.QPCap{MaxSendWR: 1024, MaxRecvWR: 1024, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				b.Fatal(err)
			}
			rdmatest.Modify(b, qp, uverbs.QPAttr{State: uverbs.QPInit, Port: 1, AccessFlags: rdmatest.AllAccess},
				uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags)
			e.b, n = qp, 0
			swaps += time.Since(t)
		}
		if _, err := e.b.PostRecv(wr); err != nil {
			b.Fatal(err)
		}
		n++
		posted++
	}
	b.ReportMetric(float64((time.Since(start)-swaps).Nanoseconds())/float64(posted), "ns/WR")
}

// SRQ.PostRecv per work request, as PostRecv: one receive a post, no
// system call. No reset drains an SRQ, so a fresh one every 1000 posts
// (1024 asked, as the QP's receive queue) keeps it from filling, outside
// ns/WR, as cbench.c does with ibv_destroy_srq and ibv_create_srq.
func BenchmarkPostSRQRecv(b *testing.B) {
	e := setup(b)
	cfg := uverbs.SRQConfig{MaxWR: 1024, MaxSGE: 1}
	srq, err := e.pd.NewSRQ(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srq.Close() }) // before setup's, which closes the PD
	wr := []uverbs.RecvWR{{SGL: []uverbs.SGE{rdmatest.SGE(b, e.mr, 8192, 64)}}}
	runtime.GC() // the SRQ's allocations too, as setup does for its own
	b.ReportAllocs()
	n, posted := 0, 0
	var swaps time.Duration
	start := time.Now()
	for b.Loop() {
		if n == 1000 {
			t := time.Now()
			if err := srq.Close(); err != nil {
				b.Fatal(err)
			}
			if srq, err = e.pd.NewSRQ(cfg); err != nil {
				b.Fatal(err)
			}
			n = 0
			swaps += time.Since(t)
		}
		if _, err := srq.PostRecv(wr); err != nil {
			b.Fatal(err)
		}
		n++
		posted++
	}
	b.ReportMetric(float64((time.Since(start)-swaps).Nanoseconds())/float64(posted), "ns/WR")
}

// A grant and its revocation, as rdmanet makes them: register 4 KiB for
// a peer's reads and writes (REG_MR), then deregister it (DEREG_MR).
func BenchmarkRegDereg(b *testing.B) {
	e := setup(b)
	mem := e.buf.Bytes()[8192 : 8192+4096]
	b.ReportAllocs()
	for b.Loop() {
		mr, err := e.pd.RegMR(mem, rdmatest.AllAccess)
		if err != nil {
			b.Fatal(err)
		}
		if err := mr.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// The same with a type-2 memory window over a registered region: bind
// 4 KiB of it for a peer's writes, then invalidate the window, each
// request signaled and its completion taken.
func BenchmarkBindInvalidate(b *testing.B) {
	e := setup(b)
	mr, err := e.pd.RegMR(e.buf.Bytes()[8192:8192+4096], uverbs.AccessLocalWrite|uverbs.AccessMWBind)
	if err != nil {
		b.Fatal(err)
	}
	defer mr.Close()
	mw, err := e.pd.AllocMW(uverbs.MWType2)
	if err != nil {
		b.Fatal(err)
	}
	defer mw.Close()
	wrs := []uverbs.SendWR{
		{Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled,
			Bind: &uverbs.MWBind{MW: mw, MR: mr, Addr: mr.Addr(), Length: 4096, Access: uverbs.AccessRemoteWrite}},
		{Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, Bind: &uverbs.MWBind{MW: mw}},
	}
	wcs := make([]cq.WC, 1)
	b.ReportAllocs()
	for b.Loop() {
		for i := range wrs {
			if _, err := e.a.PostSend(wrs[i : i+1]); err != nil {
				b.Fatal(err)
			}
			if err := drainRest(e.scq, wcs, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
}
