package conformance

import (
	"testing"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// A CQ made cq.WithSingleThreaded (IBV_CREATE_CQ_ATTR_SINGLE_THREADED),
// used by one goroutine, behaves as any CQ: every completion once and in
// order, across the ring's wrap and in batches of every size; arming and
// events as usual; Resize keeps what it holds; no allocation.
func TestSingleThreadedCQ(t *testing.T) {
	f := setup(t)
	q := f.newCQ(t, 16, cq.WithSingleThreaded())
	peer := f.newCQ(t, 16)
	a, _ := f.rcPair(t, q, q, peer, peer)
	next := uint64(0)
	for round := range 6 { // 6 × 12 completions through a 16-entry ring: it wraps
		for range 12 {
			f.send(t, a, next, uverbs.WRRDMAWrite, 0)
			next++
		}
		wcs := make([]cq.WC, 1+round*3) // batches of 1, 4, 7, …
		for got := 0; got < 12; {
			n, err := q.Poll(wcs)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wcs[:n] {
				if want := next - 12 + uint64(got); w.WRID != want || w.Status != cq.Success {
					t.Fatalf("round %d: completion %d: wr_id %d, status %v; want %d, success", round, got, w.WRID, w.Status, want)
				}
				got++
			}
		}
	}
	if err := q.ReqNotify(cq.NextCompletion); err != nil {
		t.Fatal(err)
	}
	f.send(t, a, next, uverbs.WRRDMAWrite, 0)
	if c := f.wait(t); c != q {
		t.Fatalf("event for %p, want the single-threaded CQ %p", c, q)
	}
	q.Ack(1)
	if w := rdmatest.PollN(t, q, 1); w[0].WRID != next {
		t.Errorf("after the event: wr_id %d, want %d", w[0].WRID, next)
	}
	for i := range 3 {
		f.send(t, a, 100+uint64(i), uverbs.WRRDMAWrite, 0)
	}
	if n, err := q.Poll(nil); n != 0 || err != nil { // let rxe finish them, taking none
		t.Fatalf("Poll(nil) = %d, %v", n, err)
	}
	if err := q.Resize(64); err != nil {
		t.Fatal(err)
	}
	for i, w := range rdmatest.PollN(t, q, 3) {
		if w.WRID != 100+uint64(i) {
			t.Errorf("after Resize: completion %d has wr_id %d, want %d", i, w.WRID, 100+i)
		}
	}
	wcs := make([]cq.WC, 4)
	if !testutil.Race {
		if n := testing.AllocsPerRun(100, func() { q.Poll(wcs) }); n != 0 {
			t.Errorf("Poll allocates %v times", n)
		}
	}
}
