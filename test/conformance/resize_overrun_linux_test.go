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

// 20. ibv_resize_cq(3): resizing keeps the completions the CQ holds, in
// order; a size below what it holds is refused.
func TestResizeKeepsPendingCompletions(t *testing.T) {
	f := setup(t)
	scq, rcq := f.newCQ(t, 16), f.newCQ(t, 16)
	a, _ := f.rcPair(t, scq, scq, rcq, rcq)
	for i := 0; i < 6; i++ {
		f.send(t, a, uint64(i), uverbs.WRRDMAWrite, 0)
	}
	time.Sleep(200 * time.Millisecond) // all six land: loopback rxe takes well under 1 ms
	if err := scq.Resize(64); err != nil {
		t.Fatal(err)
	}
	if scq.Size() < 64 {
		t.Errorf("size %d after resizing to 64", scq.Size())
	}
	for i, w := range rdmatest.PollN(t, scq, 6) {
		if w.WRID != uint64(i) || w.Status != cq.Success {
			t.Errorf("completion %d after the resize: %+v", i, w)
		}
	}
	for i := 0; i < 6; i++ {
		f.send(t, a, uint64(10+i), uverbs.WRRDMAWrite, 0)
	}
	time.Sleep(200 * time.Millisecond)
	if err := scq.Resize(2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("shrinking below the 6 held: err = %v, want EINVAL", err)
	}
	if err := scq.Resize(0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("resize to 0: err = %v, want EINVAL", err)
	}
	for i, w := range rdmatest.PollN(t, scq, 6) {
		if w.WRID != uint64(10+i) {
			t.Errorf("completion %d after the refused resize: %+v", i, w)
		}
	}
	if err := scq.Resize(8); err != nil {
		t.Errorf("shrinking an empty CQ: %v", err)
	}
	f.send(t, a, 99, uverbs.WRRDMAWrite, 0)
	if w := rdmatest.PollN(t, scq, 1)[0]; w.WRID != 99 {
		t.Errorf("completion after the shrink: %+v", w)
	}
}

// 19. CQ overrun: more completions than the CQ holds, without polling.
// The device reports the async event CQ_ERR naming the CQ, and later
// calls on the CQ fail clearly (ErrCQOverrun) instead of returning a
// ring that is missing completions.
func TestOverrunReportsCQErr(t *testing.T) {
	f := setup(t)
	small := f.newCQ(t, 1)
	other := f.newCQ(t, 16)
	a, _ := f.rcPair(t, small, other, other, other)
	for i := 0; i < small.Size()+3; i++ {
		f.send(t, a, uint64(i), uverbs.WRRDMAWrite, 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := f.ctx.WaitAsyncEvent(ctx)
		if err != nil {
			t.Fatalf("no CQ_ERR in 10 s: %v", err)
		}
		ev.Ack()
		t.Logf("async event %v", ev)
		if h, ok := ev.CQHandle(); ok && ev.Type == uverbs.EventCQErr {
			if h != small.EventHandle() {
				t.Errorf("CQ_ERR names CQ handle %d, want %d", h, small.EventHandle())
			}
			break
		}
	}
	// Poll fails for one completion (rxe's fast path) and for a batch,
	// and still after a Resize, which maps the CQ a new ring.
	var err error
	for _, when := range []string{"", " and a Resize"} {
		if when != "" {
			if err := small.Resize(64); err != nil {
				t.Logf("Resize after the overrun: %v", err)
			}
		}
		for _, n := range []int{1, 4} {
			_, err = small.Poll(make([]cq.WC, n))
			if !errors.Is(err, uverbs.ErrCQOverrun) || !errors.Is(err, unix.EOVERFLOW) {
				t.Errorf("Poll(%d) after the overrun%s: %v, want ErrCQOverrun", n, when, err)
			}
		}
	}
	if err := small.ReqNotify(false); !errors.Is(err, uverbs.ErrCQOverrun) {
		t.Errorf("ReqNotify after the overrun: %v, want ErrCQOverrun", err)
	}
	t.Log(err)
}
