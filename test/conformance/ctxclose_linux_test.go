package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// Closing a Context wakes everything waiting on its children and ends
// its CQs and channels (docs/RELIABILITY.md: a CQ used after its context
// closed returns ErrClosed). Issue #36 found a Wait parked with
// context.Background() asleep for good after Context.Close, and a CQ's
// Poll still handing out the completion its ring held.
func TestContextCloseEndsWaits(t *testing.T) {
	f := setup(t)
	idle, err := f.ctx.NewCompChannel() // no CQ on it
	if err != nil {
		t.Fatal(err)
	}
	q, err := f.ctx.NewCQ(cq.Config{Size: 16, Channel: f.ch})
	if err != nil {
		t.Fatal(err)
	}
	newQP := func() *uverbs.QP {
		qp, err := f.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: q, RecvCQ: q,
			Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { qp.Close() }) // after the context: ErrClosed
		return qp
	}
	a, b := newQP(), newQP()
	rdmatest.ConnectRC(t, a, b)
	// One completion in the ring, announced by an event.
	if err := q.ReqNotify(cq.NextCompletion); err != nil {
		t.Fatal(err)
	}
	f.send(t, a, 1, uverbs.WRRDMAWrite, 0)
	if got := f.wait(t); got != q {
		t.Fatalf("event for CQ %d, want %d", got.EventHandle(), q.EventHandle())
	}
	if err := q.Ack(1); err != nil {
		t.Fatal(err)
	}
	if err := q.ReqNotify(cq.NextCompletion); err != nil {
		t.Fatal(err)
	}

	// Two Waits parked with no deadline, one on each channel.
	done := make(chan error, 2)
	for _, ch := range []*cq.Channel{f.ch, idle} {
		go func() {
			_, err := ch.Wait(context.Background())
			done <- err
		}()
	}
	time.Sleep(100 * time.Millisecond) // let them park
	if err := f.ctx.Close(); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(5 * time.Second)
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, cq.ErrClosed) {
				t.Errorf("a Wait parked across Context.Close: %v, want ErrClosed", err)
			}
		case <-timeout:
			t.Fatal("Context.Close left a Wait parked")
		}
	}

	if n, err := q.Poll(make([]cq.WC, 4)); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("Poll after Context.Close = %d, %v; want ErrClosed", n, err)
	}
	if n, err := q.Poll(make([]cq.WC, 1)); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("Poll(1) after Context.Close = %d, %v; want ErrClosed", n, err)
	}
	if err := q.ReqNotify(cq.NextCompletion); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("ReqNotify after Context.Close: %v, want ErrClosed", err)
	}
	if err := q.Resize(32); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("Resize after Context.Close: %v, want ErrClosed", err)
	}
	for _, ch := range []*cq.Channel{f.ch, idle} {
		if _, _, err := ch.TryWait(); !errors.Is(err, cq.ErrClosed) {
			t.Errorf("TryWait after Context.Close: %v, want ErrClosed", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := ch.Wait(ctx); !errors.Is(err, cq.ErrClosed) {
			t.Errorf("Wait after Context.Close: %v, want ErrClosed", err)
		}
		cancel()
	}
	if err := q.Close(); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("CQ.Close after Context.Close: %v, want ErrClosed", err)
	}
	if err := idle.Close(); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("Channel.Close after Context.Close: %v, want ErrClosed", err)
	}
}
