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
	// Poll first hands out what the ring still holds, the completions
	// before the overrun, in order (issue #36: they were unreachable once
	// the overrun was noticed), then the error.
	var err error
	var got []uint64
	for {
		wc := make([]cq.WC, 1)
		n, perr := small.Poll(wc)
		if perr != nil {
			err = perr
			break
		}
		if n == 0 {
			t.Fatalf("Poll found the overrun CQ empty, without its error, after %d completions", len(got))
		}
		got = append(got, wc[0].WRID)
	}
	t.Logf("%d completions, then %v", len(got), err)
	if !errors.Is(err, uverbs.ErrCQOverrun) {
		t.Errorf("Poll after the drain: %v, want ErrCQOverrun", err)
	}
	if len(got) == 0 || len(got) >= small.Size()+3 {
		t.Errorf("%d completions handed out after the overrun, want at least 1, and fewer than the %d sent", len(got), small.Size()+3)
	}
	for i, w := range got {
		if w != uint64(i) {
			t.Errorf("completion %d after the overrun: wr_id %d, want %d", i, w, i)
		}
	}
	// Poll fails for one completion (rxe's fast path) and for a batch,
	// and still after a Resize, which maps the CQ a new ring.
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
	if err := small.ReqNotify(cq.NextCompletion); !errors.Is(err, uverbs.ErrCQOverrun) {
		t.Errorf("ReqNotify after the overrun: %v, want ErrCQOverrun", err)
	} else {
		oneVerb(t, err, "req notify cq")
	}
	oneVerb(t, err, "poll cq")
	t.Log(err)
}

// oneVerb checks that err is an *OpError of verb op on the test's device
// whose cause names no verb of its own (issue #36: "req notify cq rxe0:
// poll cq rxe0: cq overrun").
func oneVerb(t *testing.T, err error, op string) {
	t.Helper()
	var o *uverbs.OpError
	if !errors.As(err, &o) || o.Op != op || o.Device != rdmatest.DeviceName() {
		t.Errorf("%v: want an *OpError for %s %s", err, op, rdmatest.DeviceName())
		return
	}
	if errors.As(o.Err, new(*uverbs.OpError)) {
		t.Errorf("%q: two verbs in one message", err)
	}
}

// An overrun reaches its CQ with nobody reading async events (issue #36:
// Poll went on handing out completions with a hole in them, and no
// error, unless the application happened to read the CQ_ERR). Poll
// hands out what the ring holds, the completions before the overrun, in
// order, then fails; the CQ_ERR still waits for WaitAsyncEvent.
func TestOverrunWithoutReadingAsyncEvents(t *testing.T) {
	f := setup(t)
	small := f.newCQ(t, 1)
	other := f.newCQ(t, 16)
	a, _ := f.rcPair(t, small, other, other, other)
	for i := 0; i < small.Size()+3; i++ {
		f.send(t, a, uint64(i), uverbs.WRRDMAWrite, 0)
	}
	// Let the device finish the sends before the first Poll: a Poll that
	// made room while sends were still completing would let completions
	// from after the hole into the ring, and the wr_ids below would skip.
	time.Sleep(500 * time.Millisecond)
	var got []uint64
	var err error
	wc := make([]cq.WC, 1)
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, perr := small.Poll(wc)
		if perr != nil {
			err = perr
			break
		}
		if n == 1 {
			got = append(got, wc[0].WRID)
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("no error from Poll in 10 s after an overrun, with %d completions (wr_ids %v) of %d sent: the hole went unreported",
				len(got), got, small.Size()+3)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("%d completions, then %v", len(got), err)
	if !errors.Is(err, uverbs.ErrCQOverrun) {
		t.Errorf("Poll after the overrun: %v, want ErrCQOverrun", err)
	}
	oneVerb(t, err, "poll cq")
	if len(got) == 0 || len(got) >= small.Size()+3 {
		t.Errorf("%d completions before the error, want at least 1 and fewer than the %d sent", len(got), small.Size()+3)
	}
	for i, w := range got {
		if w != uint64(i) {
			t.Errorf("completion %d: wr_id %d, want %d", i, w, i)
		}
	}
	if _, err := small.Poll(make([]cq.WC, 4)); !errors.Is(err, uverbs.ErrCQOverrun) {
		t.Errorf("a second Poll: %v, want ErrCQOverrun", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := f.ctx.WaitAsyncEvent(ctx)
		if err != nil {
			t.Fatalf("the CQ_ERR was not queued for WaitAsyncEvent: %v", err)
		}
		ev.Ack()
		if h, ok := ev.CQHandle(); ok && ev.Type == uverbs.EventCQErr && h == small.EventHandle() {
			break
		}
	}
}
