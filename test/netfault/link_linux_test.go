package netfault

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/uverbs"
)

// postLoad posts nrecv receives (wr_ids 1 and up) and nsend signaled
// SENDs of 64 bytes (wr_ids 1001 and up) on e's QP.
func postLoad(t *testing.T, e *rcEnd, nrecv, nsend int) {
	t.Helper()
	for i := 0; i < nrecv; i++ {
		sge, err := e.mr.SGE(8192+64*i, 64)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.qp.PostRecv([]uverbs.RecvWR{{WRID: uint64(1 + i), SGL: []uverbs.SGE{sge}}}); err != nil {
			t.Fatalf("%s: post receive %d: %v", e.h, i, err)
		}
	}
	for i := 0; i < nsend; i++ {
		sge, err := e.mr.SGE(64*i, 64)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.qp.PostSend([]uverbs.SendWR{{WRID: uint64(1001 + i), Opcode: uverbs.WRSend,
			Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge}}}); err != nil {
			t.Fatalf("%s: post send %d: %v", e.h, i, err)
		}
	}
}

// collect polls q until it has n completions, or fails the test after
// limit; then it checks that no more come.
func collect(t *testing.T, q *cq.CQ, n int, limit time.Duration) []cq.WC {
	t.Helper()
	var out []cq.WC
	buf := make([]cq.WC, 32)
	deadline := time.Now().Add(limit)
	for len(out) < n {
		k, err := q.Poll(buf)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d completions in %v: %s", len(out), n, limit, statuses(out))
			}
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if k, _ := q.Poll(buf); k > 0 {
		t.Errorf("%d completions more than the %d posted: %+v", k, n, buf[:k])
	}
	return out
}

// checkEnded checks that wcs complete the wr_ids first, first+1, … once
// each, in order: the first with status first, the rest flushed.
func checkEnded(t *testing.T, what string, wcs []cq.WC, first uint64, want cq.Status) {
	t.Helper()
	for i, wc := range wcs {
		st := cq.WRFlushErr
		if i == 0 {
			st = want
		}
		if wc.WRID != first+uint64(i) || wc.Status != st {
			t.Errorf("%s: completion %d is wr_id %d with %q, want wr_id %d with %q", what, i, wc.WRID, wc.Status, first+uint64(i), st)
		}
	}
}

// statuses counts completions by status, as text.
func statuses(wcs []cq.WC) string {
	n := map[cq.Status]int{}
	for _, wc := range wcs {
		n[wc.Status]++
	}
	return fmt.Sprint(n)
}

// Scenario 2: the link goes down for longer than the QP's retry budget
// (a 16.8 ms ACK timeout, 2 retries: about 50 ms). The sender's first
// outstanding send ends with "transport retry counter exceeded"
// (RETRY_EXC_ERR) within that budget, every other send and receive
// posted on the QP flushes, each exactly once and in order, and the QP is
// in ERR; the peer's QP, which never heard of it, stays in RTS. Once the
// link is back, both QPs are reset and connected again, and a stream
// runs as before. On 6.12 the first send may flush too (scenario 3's
// send_err ending), which the test accepts and reports.
func TestLinkDownLongerThanRetries(t *testing.T) {
	requireTwoHosts(t)
	a, b := openRC(t, hostA, 1<<16, 64), openRC(t, hostB, 1<<16, 64)
	opts := uverbs.ConnectOptions{Timeout: 12, RetryCnt: 2}
	connectRC(t, a, b, 1, opts)
	s := stream{op: uverbs.WRSend, n: 200, slots: 8, max: 1024}
	s.run(t, a, b)

	<-schedule(t, unplug(0, hostB))
	start := time.Now()
	postLoad(t, a, 16, 32)
	sends := collect(t, a.scq, 32, 20*time.Second)
	took := time.Since(start)
	recvs := collect(t, a.rcq, 16, 5*time.Second)
	t.Logf("link down: the first send ended after %v with %q; sends: %s; receives: %s",
		took.Round(time.Millisecond), sends[0].Status, statuses(sends), statuses(recvs))
	first := cq.RetryExcErr
	if sends[0].Status == cq.WRFlushErr && !kernelBefore(t, 6, 12) {
		// 6.12's rxe fails the QP at once when it cannot hand a packet to
		// the network (its send_err counter; scenario 3 below): every
		// send flushes, no RETRY_EXC_ERR first. A kernel's ending, not
		// goverbs': reported, and the rest of the scenario holds.
		t.Logf("the kernel failed the QP at its first unsendable packet (6.12's send_err): every send flushed, none ended RETRY_EXC_ERR")
		first = cq.WRFlushErr
	}
	checkEnded(t, "sends", sends, 1001, first)
	checkEnded(t, "receives", recvs, 1, cq.WRFlushErr)
	if st := a.qpState(t); st != uverbs.QPErr {
		t.Errorf("host A's QP is %v after its retries ran out, want ERR", st)
	}
	if st := b.qpState(t); st != uverbs.QPRTS {
		t.Errorf("host B's QP is %v, want RTS: nothing reached it", st)
	}

	<-schedule(t, plug(0, hostB))
	connectRC(t, a, b, 5000, opts)
	took = s.run(t, a, b)
	t.Logf("link up, both QPs reset and connected again: %d messages in %v", s.n, took.Round(time.Millisecond))
}

// Scenario 3: the link goes down in the middle of a stream for less than
// the retry budget (a 268 ms ACK timeout, 6 retries: about 1.9 s), 500 ms.
// The link dies two ways: the path drops every packet (netem, already in
// place, turned to 100 % loss both ways: a failure past the hosts' own
// ports), or host B's end goes down and host A's loses its carrier.
//
// On 6.1 neither is an error: the stream stalls while the link is down,
// rxe's timer resends, and every message arrives once, in order, intact.
// On 6.12 a packet rxe cannot hand to the network at all (its send_err
// counter) fails the QP at once, whatever the retry budget: every send
// from the one that met the dead link on completes with WR_FLUSH_ERR, no
// error status first, and no later one is delivered; each arrived message
// arrived once, in order, intact, and both QPs connect again once the
// link is back.
func TestLinkDownShorterThanRetries(t *testing.T) {
	requireTwoHosts(t)
	const down = 500 * time.Millisecond
	clean, dead := netlink.Netem{}, netlink.Netem{Loss: 1}
	for _, c := range []struct {
		name  string
		setup []fault // before the stream
		cut   []fault // at message 100
	}{
		{"path", []fault{impair(0, hostA, clean), impair(0, hostB, clean)},
			[]fault{impair(0, hostA, dead), impair(0, hostB, dead), impair(down, hostA, clean), impair(down, hostB, clean)}},
		{"carrier", nil, []fault{unplug(0, hostB), plug(down, hostB)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := openRC(t, hostA, 1<<16, 64), openRC(t, hostB, 1<<16, 64)
			opts := uverbs.ConnectOptions{Timeout: 16, RetryCnt: 6}
			connectRC(t, a, b, 1, opts)
			<-schedule(t, c.setup...)
			s := stream{op: uverbs.WRSend, n: 400, slots: 16, max: 2048, hookAt: 100}
			var cutDone <-chan struct{}
			s.hook = func() { cutDone = schedule(t, c.cut...) }
			before := rxeCounters(t, "rxe0")
			took, errA, errB := s.try(a, b)
			if cutDone != nil {
				<-cutDone
			}
			_, moved := countersSince(t, "rxe0", before)
			var fail *broken
			var got *cut
			switch {
			case errA == nil && errB == nil:
				t.Logf("no error: %d messages in %v with the link down for %v after message %d; %s", s.n, took.Round(time.Millisecond), down, s.hookAt, moved)
				if took < down {
					t.Errorf("the stream took %v, less than the %v the link was down: did it go down?", took, down)
				}
			case errors.As(errA, &fail) && errors.As(errB, &got):
				t.Logf("host A's QP failed: %v; %v; %s", fail, got, moved)
				if kernelBefore(t, 6, 12) {
					t.Errorf("on this kernel the stream must survive %v of a dead link", down)
				}
				if fail.status != cq.WRFlushErr || got.got < fail.at {
					t.Errorf("send %d failed with %q and %d messages arrived: want a flush, and every send that succeeded delivered", fail.at, fail.status, got.got)
				}
				if st := a.qpState(t); st != uverbs.QPErr {
					t.Errorf("host A's QP is %v, want ERR", st)
				}
				connectRC(t, a, b, 5000, opts)
				s := stream{op: uverbs.WRSend, n: 100, slots: 16, max: 2048}
				s.run(t, a, b)
				t.Logf("both QPs reset and connected again: %d messages", s.n)
			default:
				dumpNet(t)
				t.Fatalf("host A: %v\nhost B: %v", errA, errB)
			}
		})
	}
}

// kernelBefore reports whether the running kernel is older than
// major.minor.
func kernelBefore(t *testing.T, major, minor int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	var ma, mi int
	if _, err := fmt.Sscanf(string(b), "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("kernel release %q: %v", b, err)
	}
	return ma < major || ma == major && mi < minor
}

// Scenario 7: receiver not ready. With an RNR retry count of 1, sends to
// a QP with no receive posted end with "RNR retry counter exceeded"
// (RNR_RETRY_EXC_ERR), the rest flushed; with 7, which means forever,
// the sends wait out the RNR NAKs and complete once the receives come.
func TestRNR(t *testing.T) {
	requireTwoHosts(t)
	t.Run("exhausted", func(t *testing.T) {
		a, b := openRC(t, hostA, 1<<16, 64), openRC(t, hostB, 1<<16, 64)
		connectRC(t, a, b, 1, uverbs.ConnectOptions{RNRRetry: 1, MinRNRTimer: 1})
		start := time.Now()
		postLoad(t, a, 0, 4)
		sends := collect(t, a.scq, 4, 20*time.Second)
		t.Logf("no receive posted at B: after %v, %q; sends: %s", time.Since(start).Round(time.Millisecond), sends[0].Status, statuses(sends))
		checkEnded(t, "sends", sends, 1001, cq.RNRRetryExcErr)
		if st := a.qpState(t); st != uverbs.QPErr {
			t.Errorf("host A's QP is %v, want ERR", st)
		}
	})
	t.Run("forever", func(t *testing.T) {
		a, b := openRC(t, hostA, 1<<16, 64), openRC(t, hostB, 1<<16, 64)
		connectRC(t, a, b, 1, uverbs.ConnectOptions{MinRNRTimer: 1})
		const wait = 300 * time.Millisecond
		s := stream{op: uverbs.WRSend, n: 64, slots: 16, max: 1024, recvDelay: wait}
		before := rxeCounters(t, "rxe1")
		took := s.run(t, a, b)
		d, moved := countersSince(t, "rxe1", before)
		t.Logf("receives posted %v late: %d messages in %v; %s", wait, s.n, took.Round(time.Millisecond), moved)
		if d["send_rnr_err"] == 0 {
			t.Errorf("host B sent no RNR NAK (send_rnr_err): the receives were not late")
		}
	})
}
