package conformance

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// TestCloseCQWhileWaitWithEventQueued is issue [X]'s sequence, looped: a
// receive CQ on a channel, armed; one SEND's completion polled, so its
// event is queued in the channel's fd and not yet read; both QPs closed;
// then the CQ's Close and a Wait on the channel at once; then Ack of what
// Wait returned, Close again if the first said EBUSY, and the rest
// closed. Every step has a deadline (testutil.Within, Together); a step
// that passes it fails the test with every goroutine's stack.
//
// It loops 500 times by default (issue [X]'s count), about 7 s in the
// 6.1/amd64 VM; GOVERBS_CLOSERACE sets another count.
func TestCloseCQWhileWaitWithEventQueued(t *testing.T) {
	n := testutil.Rounds("GOVERBS_CLOSERACE", 500)
	for i := 0; i < n; i++ {
		if !closeRaceOnce(t, i) {
			return
		}
	}
}

// closeRaceOnce runs the sequence once on a context of its own; false
// when it failed.
func closeRaceOnce(t *testing.T, iter int) bool {
	t.Helper()
	step := func(name string, limit time.Duration, fn func() error) error {
		t.Helper()
		return testutil.Within(t, fmt.Sprintf("iteration %d: %s", iter, name), limit, fn)
	}
	ctx := rdmatest.Open(t)
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	ch, err := ctx.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	buf, err := uverbs.AllocBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), rdmatest.AllAccess)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	as, err := ctx.NewCQ(cq.Config{Size: 16})
	if err != nil {
		t.Fatal(err)
	}
	br, err := ctx.NewCQ(cq.Config{Size: 16, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	qcfg := func(send, recv *cq.CQ) uverbs.QPConfig {
		return uverbs.QPConfig{Type: uverbs.RC, SendCQ: send, RecvCQ: recv,
			Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
	}
	a, err := pd.NewQP(qcfg(as, as))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pd.NewQP(qcfg(as, br))
	if err != nil {
		t.Fatal(err)
	}
	rdmatest.ConnectRC(t, a, b)
	if err := br.ReqNotify(cq.NextCompletion); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 4096, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 16)}}}); err != nil {
		t.Fatal(err)
	}
	rdmatest.PollN(t, br, 1)
	rdmatest.PollN(t, as, 1)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// The race: Close of the CQ beside a Wait on its channel, whose event
	// is queued. A Close that succeeds took the event with the CQ, so
	// nothing more can come: it cancels the Wait's context then, rather
	// than leave the Wait to its 2 s deadline.
	var got *cq.CQ
	wctx, cancelWait := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelWait()
	errs := testutil.Together(t,
		testutil.Step{Name: fmt.Sprintf("iteration %d: CQ.Close racing Wait", iter), Limit: 4 * time.Second, Fn: func() error {
			err := br.Close()
			if err == nil {
				cancelWait()
			}
			return err
		}},
		testutil.Step{Name: fmt.Sprintf("iteration %d: Wait", iter), Limit: 4 * time.Second, Fn: func() error {
			var err error
			got, err = ch.Wait(wctx)
			return err
		}})
	cerr, werr := errs[0], errs[1]
	switch {
	case werr == nil && got != br:
		t.Fatalf("iteration %d: Wait returned another CQ", iter)
	case werr == nil:
		step("Ack", time.Second, func() error { return got.Ack(1) })
	case errors.Is(werr, context.Canceled) && cerr == nil:
		// Close took the CQ first: its event went with it.
	default:
		t.Fatalf("iteration %d: Wait: %v", iter, werr)
	}
	if errors.Is(cerr, syscall.EBUSY) {
		if err := step("CQ.Close again", 4*time.Second, br.Close); err != nil {
			t.Fatalf("iteration %d: CQ.Close after Ack: %v", iter, err)
		}
	} else if cerr != nil {
		t.Fatalf("iteration %d: CQ.Close: %v", iter, cerr)
	}
	if err := step("send CQ's Close", 4*time.Second, as.Close); err != nil {
		t.Fatal(err)
	}
	if err := step("Channel.Close", 4*time.Second, ch.Close); err != nil {
		t.Fatal(err)
	}
	if err := step("Context.Close", 4*time.Second, ctx.Close); err != nil {
		t.Fatal(err)
	}
	return !t.Failed()
}
