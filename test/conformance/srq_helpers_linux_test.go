package conformance

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// The SRQ tests' helpers. Receive slots of the SRQ tests are srqSlot
// bytes from srqRecvBase in the fixture's buffer; the messages they send
// come from srqSendBase on.
const (
	srqSlot     = 64
	srqRecvBase = 0
	srqSendBase = 512 << 10
)

// newSRQ makes an SRQ on the fixture's PD, closed at the end of the test
// (after the QPs made later, whose cleanups run first) unless the test
// closed it.
func (f *fix) newSRQ(t *testing.T, cfg uverbs.SRQConfig) *uverbs.SRQ {
	t.Helper()
	s, err := f.pd.NewSRQ(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("closing an SRQ: %v", err)
		}
	})
	return s
}

// qpOn makes a QP of type typ that takes its receives from srq (nil: a
// receive queue of its own of 16), with sendDepth send requests; closed
// at the end of the test unless the test closed it.
func (f *fix) qpOn(t *testing.T, typ uverbs.QPType, srq *uverbs.SRQ, send, recv *cq.CQ, sendDepth uint32) *uverbs.QP {
	t.Helper()
	qp, err := f.pd.NewQP(uverbs.QPConfig{Type: typ, SendCQ: send, RecvCQ: recv, SRQ: srq,
		Cap: uverbs.QPCap{MaxSendWR: sendDepth, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := qp.Close(); err != nil && !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("closing a QP: %v", err)
		}
	})
	return qp
}

// connectSender connects the RC QPs a and b as rdmatest.ConnectRC does,
// but a, the sender, retries an RNR NAK rnrRetry times and an ACK
// timeout retryCnt times (1 to 7). ConnectOptions takes 0 for its
// default, 7, so the fewest retries it can ask for is 1. 7 RNR retries
// are for ever, as ibv_modify_qp(3) says; rxe retries for ever after
// timeouts at 7 too (rxe_comp.c: "if (qp->comp.retry_cnt != 7)
// qp->comp.retry_cnt--"), so a sender that must fail against a silent
// peer asks for fewer.
func connectSender(t *testing.T, a, b *uverbs.QP, rnrRetry, retryCnt uint8) {
	t.Helper()
	gi := rdmatest.GIDIndex()
	ea := uverbs.Endpoint{QPN: a.QPN(), PSN: 100, GID: rdmatest.GID(t, gi)}
	eb := uverbs.Endpoint{QPN: b.QPN(), PSN: 100, GID: ea.GID}
	opts := uverbs.ConnectOptions{Port: 1, Access: rdmatest.AllAccess, PathMTU: uverbs.MTU1024, GIDIndex: gi,
		MaxRdAtomic: 4, MaxDestRdAtomic: 4, MinRNRTimer: 1}
	if gi == 0 {
		e, err := a.PD().Context().QueryGID(1, 0)
		if err != nil {
			t.Fatal(err)
		}
		opts.GIDType = e.Type
	}
	aOpts := opts
	aOpts.RNRRetry, aOpts.RetryCnt = rnrRetry, retryCnt
	if err := a.ConnectRC(ea, eb, &aOpts); err != nil {
		t.Fatal(err)
	}
	if err := b.ConnectRC(eb, ea, &opts); err != nil {
		t.Fatal(err)
	}
	for _, q := range []*uverbs.QP{a, b} {
		if got, err := q.Query(uverbs.QPAttrState); err != nil || got.State != uverbs.QPRTS {
			t.Fatalf("QP %d after connecting: %v, %v", q.QPN(), got.State, err)
		}
	}
	if got, err := a.Query(uverbs.QPAttrRNRRetry | uverbs.QPAttrRetryCnt); err != nil || got.RNRRetry != rnrRetry || got.RetryCnt != retryCnt {
		t.Fatalf("the sender's RNR retry %d, retry count %d (%v); want %d, %d", got.RNRRetry, got.RetryCnt, err, rnrRetry, retryCnt)
	}
}

// srqRecvWR returns a receive of one srqSlot-byte slot (slot k) with the
// given wr_id.
func (f *fix) srqRecvWR(t *testing.T, wrid uint64, k int) uverbs.RecvWR {
	t.Helper()
	return uverbs.RecvWR{WRID: wrid, SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, srqRecvBase+k*srqSlot, srqSlot)}}
}

// srqPost posts n receives to srq, wr_ids base to base+n-1, slot k for
// wr_id base+k.
func (f *fix) srqPost(t *testing.T, srq *uverbs.SRQ, base uint64, n int) {
	t.Helper()
	wrs := make([]uverbs.RecvWR, n)
	for k := range wrs {
		wrs[k] = f.srqRecvWR(t, base+uint64(k), k)
	}
	if got, err := srq.PostRecv(wrs); got != n || err != nil {
		t.Fatalf("posting %d receives to the SRQ: %d posted, %v", n, got, err)
	}
}

// sendN posts n signaled 16-byte SENDs on qp, wr_ids base on; each
// message carries its wr_id in its first 8 bytes.
func (f *fix) sendN(t *testing.T, qp *uverbs.QP, base uint64, n int) {
	t.Helper()
	for i := range n {
		id := base + uint64(i)
		off := srqSendBase + int(id%1024)*16
		binary.LittleEndian.PutUint64(f.mem[off:], id)
		binary.LittleEndian.PutUint64(f.mem[off+8:], ^id)
		if _, err := qp.PostSend([]uverbs.SendWR{{WRID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, off, 16)}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// successes polls n completions from q and checks that each succeeded.
func successes(t *testing.T, q *cq.CQ, n int) []cq.WC {
	t.Helper()
	wcs := rdmatest.PollN(t, q, n)
	for _, w := range wcs {
		if w.Status != cq.Success {
			t.Fatalf("completion %+v: %v", w, w.Status)
		}
	}
	return wcs
}

// quiet checks that no completion comes to q within d.
func quiet(t *testing.T, q *cq.CQ, d time.Duration, why string) {
	t.Helper()
	wcs := make([]cq.WC, 8)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		n, err := q.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Fatalf("%s: completions came: %+v", why, wcs[:n])
		}
	}
}

// asyncFor collects the Context's async events for d (acknowledging
// each), leaving out port and device events.
func asyncFor(t *testing.T, c *uverbs.Context, d time.Duration) []uverbs.AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out []uverbs.AsyncEvent
	for {
		ev, err := c.WaitAsyncEvent(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		ev.Ack()
		if k := ev.Kind(); k != uverbs.ElementPort && k != uverbs.ElementDevice {
			out = append(out, ev)
		}
	}
}

// waitAsync waits up to 10 s for an async event that match accepts,
// acknowledging it and every event before it; the others it returns.
func waitAsync(t *testing.T, c *uverbs.Context, what string, match func(uverbs.AsyncEvent) bool) (uverbs.AsyncEvent, []uverbs.AsyncEvent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var others []uverbs.AsyncEvent
	for {
		ev, err := c.WaitAsyncEvent(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v (events before: %v)", what, err, others)
		}
		ev.Ack()
		if match(ev) {
			return ev, others
		}
		if k := ev.Kind(); k != uverbs.ElementPort && k != uverbs.ElementDevice {
			others = append(others, ev)
		}
	}
}

// srqLimitEvent reports whether ev is srq's limit event.
func srqLimitEvent(srq *uverbs.SRQ) func(uverbs.AsyncEvent) bool {
	return func(ev uverbs.AsyncEvent) bool {
		h, ok := ev.SRQHandle()
		return ok && h == srq.EventHandle() && ev.Type == uverbs.EventSRQLimitReached
	}
}

// countSRQEvents counts the events in evs about srq, and fails the test
// on any SRQ event other than the limit's.
func countSRQEvents(t *testing.T, srq *uverbs.SRQ, evs []uverbs.AsyncEvent) int {
	t.Helper()
	n := 0
	for _, ev := range evs {
		if h, ok := ev.SRQHandle(); ok && h == srq.EventHandle() {
			if ev.Type != uverbs.EventSRQLimitReached {
				t.Errorf("SRQ event %v", ev)
			}
			n++
		}
	}
	return n
}

// wantErrAt checks that a post of a batch stopped at request i, with n
// posted and an error wrapping want that names the request.
func wantErrAt(t *testing.T, what string, n int, err error, i int, want error) {
	t.Helper()
	if n != i || !errors.Is(err, want) || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("work request %d", i)) {
		t.Errorf("%s: %d posted, %v; want %d posted and an error wrapping %v that names work request %d", what, n, err, i, want, i)
	}
}

// pollOne polls q for one completion for up to d.
func pollOne(q *cq.CQ, d time.Duration) (cq.WC, bool) {
	wcs := make([]cq.WC, 1)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if n, err := q.Poll(wcs); err == nil && n == 1 {
			return wcs[0], true
		}
	}
	return cq.WC{}, false
}

// landedBytes counts the bytes of b that are no longer 0.
func landedBytes(b []byte) int {
	n := 0
	for _, c := range b {
		if c != 0 {
			n++
		}
	}
	return n
}
