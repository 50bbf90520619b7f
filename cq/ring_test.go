package cq

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/cqseam"
)

// fakeBackend is a backend whose ring is a slice of WRIDs, polled as
// cqseam.RingLock's protocol says.
type fakeBackend struct {
	wrids    []uint64
	l        *cqseam.RingLock
	locked   bool
	released bool
}

func (b *fakeBackend) Handle() uint32                   { return 1 }
func (b *fakeBackend) Size() int                        { return 16 }
func (b *fakeBackend) ReqNotify(bool) error             { return nil }
func (b *fakeBackend) EventRead()                       {}
func (b *fakeBackend) Resize(n int) (int, error)        { return n, nil }
func (b *fakeBackend) Destroy() (uint32, uint32, error) { b.released = true; return 0, 0, nil }

func (b *fakeBackend) ArmNeedsEventsRead() bool { return false }

func (b *fakeBackend) Ring(l *cqseam.RingLock) cqseam.Ring[WC] {
	b.l = l
	return fakeRing{b}
}

type fakeRing struct{ b *fakeBackend }

func (r fakeRing) PollRing(wcs []WC, l *cqseam.RingLock) (int, error) {
	if e := l.Err(); e != nil {
		return 0, *e
	}
	if r.b.released || len(r.b.wrids) == 0 {
		return 0, nil
	}
	l.Lock()
	defer l.Unlock()
	if e := l.Err(); e != nil {
		return 0, *e
	}
	r.b.locked = true
	n := min(len(wcs), len(r.b.wrids))
	for i := range n {
		wcs[i] = WC{WRID: r.b.wrids[i]}
	}
	r.b.wrids = r.b.wrids[n:]
	return n, nil
}

func newFake(t *testing.T, wrids ...uint64) (*CQ, *fakeBackend) {
	t.Helper()
	fb := &fakeBackend{wrids: wrids}
	c, err := newCQ("fake0", Config{Size: 16}, func(cqseam.Request) (backend, error) { return fb, nil })
	if err != nil {
		t.Fatal(err)
	}
	return c, fb
}

// Poll goes to the provider's ring (one call, no lock for an empty ring,
// the lock to consume); Close ends it with ErrClosed.
func TestPollRing(t *testing.T) {
	c, fb := newFake(t, 1, 2, 3)
	wcs := make([]WC, 2)
	if n, err := c.Poll(wcs); n != 2 || err != nil || wcs[1].WRID != 2 {
		t.Fatalf("Poll = %d, %v, %+v", n, err, wcs)
	}
	if n, err := c.Poll(wcs); n != 1 || err != nil || wcs[0].WRID != 3 {
		t.Fatalf("second Poll = %d, %v", n, err)
	}
	if n, err := c.Poll(wcs); n != 0 || err != nil {
		t.Fatalf("Poll of an empty CQ = %d, %v", n, err)
	}
	if !fb.locked {
		t.Errorf("the ring consumed without the CQ's lock")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Poll(wcs); !errors.Is(err, ErrClosed) {
		t.Errorf("Poll after Close: %v, want ErrClosed", err)
	}
}

// A CQ the backend marks broken (an overrun) fails every Poll with that
// error, until Close replaces it with ErrClosed.
func TestRingLockFail(t *testing.T) {
	c, fb := newFake(t, 1)
	broken := errors.New("cq overrun")
	fb.l.Fail(broken)
	fb.l.Fail(errors.New("a second error does not replace the first"))
	if _, err := c.Poll(make([]WC, 1)); err != broken {
		t.Errorf("Poll of a broken CQ: %v, want %v", err, broken)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Poll(make([]WC, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Poll after Close: %v, want ErrClosed", err)
	}
	if err := c.Resize(4); !errors.Is(err, ErrClosed) {
		t.Errorf("Resize after Close: %v", err)
	}
	if err := c.Resize(0); err == nil || !errors.Is(err, ErrClosed) && !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Resize(0): %v", err)
	}
}

func TestPollAllocatesNothing(t *testing.T) {
	c, _ := newFake(t)
	wcs := make([]WC, 4)
	if n := testing.AllocsPerRun(100, func() { c.Poll(wcs) }); n != 0 {
		t.Errorf("Poll allocates %v times", n)
	}
}

// A CQ's Poll that finds completions waits for the CQ's lock.
func TestPollTakesLock(t *testing.T) {
	c, _ := newFake(t, 1)
	c.lock.Lock()
	done := make(chan int)
	go func() { n, _ := c.Poll(make([]WC, 1)); done <- n }()
	select {
	case n := <-done:
		t.Fatalf("a default CQ's Poll consumed %d without its lock", n)
	case <-time.After(20 * time.Millisecond):
	}
	c.lock.Unlock()
	if n := <-done; n != 1 {
		t.Errorf("Poll after the lock came free = %d, want 1", n)
	}
}

// newFakeOn is newFake with the CQ attached to ch.
func newFakeOn(t *testing.T, ch *Channel) (*CQ, *fakeBackend) {
	t.Helper()
	fb := &fakeBackend{}
	c, err := newCQ("fake0", Config{Size: 16, Channel: ch}, func(cqseam.Request) (backend, error) { return fb, nil })
	if err != nil {
		t.Fatal(err)
	}
	return c, fb
}
