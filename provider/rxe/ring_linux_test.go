package rxe

import (
	"errors"
	"fmt"
	"github.com/goverbs/goverbs/internal/cqseam"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uapi"
)

// mappedCQ is a CQ on a ring in its own anonymous mapping, as the
// kernel's would be: retire may map over it.
func mappedCQ(t *testing.T, slots int) (*completionQueue, []byte) {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, 4096+slots*64, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	h := (*uapi.RxeQueueBuf)(unsafe.Pointer(&mem[0]))
	h.Log2ElemSize, h.IndexMask = 6, uint32(slots-1)
	r, err := newQueue(mem, unsafe.Sizeof(uapi.IBUverbsWC{}))
	if err != nil {
		t.Fatal(err)
	}
	q := &completionQueue{ring: r}
	q.live.Store(r)
	return q, mem
}

// produce writes n completions with WRIDs from first, as the kernel would.
func produce(q *completionQueue, first uint64, n int) {
	r := q.ring
	p := r.prod.Load()
	for i := range n {
		k := (*uapi.IBUverbsWC)(r.slot(p))
		*k = uapi.IBUverbsWC{WRID: first + uint64(i), QPNum: 7}
		p = (p + 1) & r.mask
	}
	r.prod.Store(p)
}

// PollRing follows cqseam.RingLock's protocol: an empty ring is answered
// without the lock (here held by the test, as a Close would), a ring with
// completions only under it, and the error word wins over both.
func TestPollRing(t *testing.T) {
	q, _ := mappedCQ(t, 16)
	defer q.Release()
	var l cqseam.RingLock
	wcs := make([]cq.WC, 4)
	l.Lock()
	if n, err := q.PollRing(wcs, &l); n != 0 || err != nil { // would deadlock if it locked
		t.Fatalf("empty ring: %d, %v", n, err)
	}
	produce(q, 100, 6)
	done := make(chan int)
	go func() { n, _ := q.PollRing(wcs, &l); done <- n }()
	select {
	case n := <-done:
		t.Fatalf("PollRing consumed %d completions without the lock", n)
	case <-time.After(20 * time.Millisecond):
	}
	l.Unlock()
	if n := <-done; n != 4 || wcs[0].WRID != 100 || wcs[3].WRID != 103 || wcs[3].QPNum != 7 {
		t.Fatalf("PollRing = %d, %+v", n, wcs)
	}
	if n := testing.AllocsPerRun(100, func() { q.PollRing(wcs, &l) }); n != 0 {
		t.Errorf("PollRing allocates %v times", n)
	}
	// A broken CQ, as the uverbs layer breaks it: Fail, then Break. Its
	// PollRing returns the error whether the ring is empty or not, for
	// one completion or more (test/conformance's TestOverrunReportsCQErr
	// does the same on the kernel's ring, and across a Resize).
	broken := errors.New("overrun")
	l.Fail(broken)
	q.Break()
	for _, k := range []int{0, 1, 4} {
		produce(q, 200, k)
		for _, w := range [][]cq.WC{wcs[:1], wcs} {
			if n, err := q.PollRing(w, &l); n != 0 || err != broken {
				t.Errorf("PollRing(%d) of a failed CQ holding %d more: %d, %v", len(w), k, n, err)
			}
		}
	}
}

// PollRing's one-completion fast path takes the lock after its look, and
// then takes nothing from the ring it looked at if that is no longer the
// CQ's: here the look's ring (live) is left in place while the CQ's ring
// has moved on, as when a Resize or Close ran between the look and the
// lock. A Resize's new ring is polled instead; after a Close, nothing.
func TestPollRingRingChanged(t *testing.T) {
	q, _ := mappedCQ(t, 16)
	defer q.Release()
	old := q.ring
	produce(q, 1, 2)
	next, _ := mappedCQ(t, 16)
	defer next.Release()
	produce(next, 100, 1)
	var l cqseam.RingLock
	wcs := make([]cq.WC, 1)

	q.ring = next.ring // resized: live still names the old ring
	if n, err := q.PollRing(wcs, &l); n != 1 || err != nil || wcs[0].WRID != 100 {
		t.Fatalf("after a Resize: PollRing = %d, %v, WRID %d; want 1 completion from the new ring (WRID 100)", n, err, wcs[0].WRID)
	}
	q.ring = nil // closed: live still names the old ring
	if n, err := q.PollRing(wcs, &l); n != 0 || err != nil {
		t.Fatalf("after a Close: PollRing = %d, %v; want 0", n, err)
	}
	if c := old.cons.Load(); c != 0 {
		t.Errorf("the old ring's consumer index moved to %d", c)
	}
	q.ring = old
	unlocked := make(chan struct{})
	go func() {
		l.Lock()
		close(unlocked) // taken: PollRing gave it back
		l.Unlock()
	}()
	select {
	case <-unlocked:
	case <-time.After(5 * time.Second):
		t.Error("PollRing left the lock held")
	}
}

// A ring given back while a lock-free PollRing may read it is replaced by
// a placeholder that reads as an empty ring, and unmapped only once the
// ring is unreachable.
func TestRetire(t *testing.T) {
	q, mem := mappedCQ(t, 64)
	produce(q, 1, 3)
	addr := uintptr(unsafe.Pointer(&mem[0]))
	r := q.live.Load()
	var l cqseam.RingLock
	q.Release()
	// What a PollRing that loaded the ring before Release reads now:
	// zeros, an empty ring, and no fault.
	if p, c := r.prod.Load(), r.cons.Load(); p != 0 || c != 0 {
		t.Errorf("retired ring reads prod %d, cons %d; want the placeholder's zeros", p, c)
	}
	if n, err := q.PollRing(make([]cq.WC, 4), &l); n != 0 || err != nil {
		t.Errorf("PollRing after Release = %d, %v", n, err)
	}
	if n := q.Poll(make([]cq.WC, 4)); n != 0 {
		t.Errorf("Poll after Release = %d", n)
	}
	if !mapped(t, addr) {
		t.Fatalf("the placeholder at %#x is not mapped", addr)
	}
	runtime.KeepAlive(r)
	r, q = nil, nil
	deadline := time.Now().Add(10 * time.Second)
	for mapped(t, addr) {
		if time.Now().After(deadline) {
			t.Fatalf("the placeholder at %#x is still mapped 10 s after its ring became unreachable", addr)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// mapped reports whether a mapping covers addr. Not whether one starts
// there: the kernel (and qemu-user, which runs the big-endian tests)
// merges neighbouring mappings of the same kind into one line of
// /proc/self/maps, as it may a placeholder and an earlier test's.
func mapped(t *testing.T, addr uintptr) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(maps), "\n") {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(l, "%x-%x", &lo, &hi); err == nil && lo <= addr && addr < hi {
			return true
		}
	}
	return false
}

// Poll is PollRing with a lock of its own, for tests that poll the ring
// alone.
func (q *completionQueue) Poll(wcs []cq.WC) int {
	var l cqseam.RingLock
	n, _ := q.PollRing(wcs, &l)
	return n
}
