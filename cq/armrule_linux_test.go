package cq

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/cqseam"
)

// seqBackend plays an mlx5 CQ and its device, as internal/mlx5model does:
// the device raises an event for a completion while armed, and ignores an
// arm whose sequence number is not the count of the events it raised; the
// provider's number advances per EventRead.
type seqBackend struct {
	fakeBackend
	sn uint32 // the provider's arm sequence number: guarded by the CQ's lock

	mu     sync.Mutex // the device's side
	w      int        // the channel's pipe
	h      uint64     // the CQ's event handle
	raised uint32     // events raised
	armed  int        // 0 not armed, 1 solicited, 2 next
	stale  int        // arms ignored
}

func (b *seqBackend) ArmNeedsEventsRead() bool { return true }
func (b *seqBackend) EventRead()               { b.sn++ }

func (b *seqBackend) ReqNotify(sol bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.sn&3 != b.raised&3:
		b.stale++
	case !sol:
		b.armed = 2
	case b.armed == 0:
		b.armed = 1
	}
	return nil
}

// complete adds a completion, solicited or not, and reports whether it
// raised an event.
func (b *seqBackend) complete(t *testing.T, sol bool) bool {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.armed == 0 || b.armed == 1 && !sol {
		return false
	}
	b.armed = 0
	b.raised++
	var ev [8]byte
	binary.NativeEndian.PutUint64(ev[:], b.h)
	if _, err := unix.Write(b.w, ev[:]); err != nil {
		t.Fatal(err)
	}
	return true
}

// newSeqCQ makes a CQ on ch whose backend is a seqBackend writing its
// events to w.
func newSeqCQ(t *testing.T, ch *Channel, w int) (*CQ, *seqBackend) {
	t.Helper()
	b := &seqBackend{w: w}
	c, err := newCQ("seq0", Config{Size: 16, Channel: ch}, func(cqseam.Request) (backend, error) { return b, nil })
	if err != nil {
		t.Fatal(err)
	}
	b.h = c.EventHandle()
	if _, ok := c.arm.(*readFirst); !ok {
		t.Fatalf("a backend that needs its events read before an arm is armed through %T, not readFirst", c.arm)
	}
	return c, b
}

func (c *CQ) mustArm(t *testing.T, n Notify) {
	t.Helper()
	if err := c.ReqNotify(n); err != nil {
		t.Fatal(err)
	}
}

func mustWait(t *testing.T, ch *Channel, want *CQ) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := ch.Wait(ctx)
	if err != nil || got != want {
		t.Fatalf("Wait = %v, %v; want the CQ's event", got, err)
	}
	got.Ack(1)
}

// On a device whose arms need the events read first, an arm made after
// the event fired and before it was read still counts (the arm reads the
// event ahead, and Wait delivers it as usual), other CQs' events on the
// channel stay queued for Wait in their order, and however many such arms
// give one more event.
func TestArmAfterEventBeforeRead(t *testing.T) {
	for _, n := range []Notify{NextCompletion, NextSolicited} {
		ch, w := pipeChannel(t)
		a, ab := newSeqCQ(t, ch, w)
		b, bb := newSeqCQ(t, ch, w)
		a.mustArm(t, n)
		b.mustArm(t, n)
		if !bb.complete(t, true) || !ab.complete(t, true) {
			t.Fatal("an armed CQ's completion raised no event")
		}
		a.mustArm(t, n) // a's event is queued, behind b's
		a.mustArm(t, n)
		if ab.stale != 0 {
			t.Errorf("notify %d: %d arms ignored by the device, want 0", n, ab.stale)
		}
		mustWait(t, ch, b)
		mustWait(t, ch, a)
		if !ab.complete(t, true) {
			t.Fatalf("notify %d: the arm made before the event was read was lost", n)
		}
		mustWait(t, ch, a)
		if ab.complete(t, true) {
			t.Errorf("notify %d: two arms before the event was read gave two more events", n)
		}
		if bb.complete(t, true) {
			t.Errorf("notify %d: b raised an event without a re-arm", n)
		}
		if ab.sn != ab.raised || bb.sn != bb.raised {
			t.Errorf("notify %d: sequence numbers %d, %d after %d, %d events", n, ab.sn, bb.sn, ab.raised, bb.raised)
		}
		unix.Close(w)
		a.Close()
		b.Close()
		ch.Close()
	}
}

// The usual loop (arm, wait, arm) arms without touching the channel:
// each arm comes after its CQ's event was read.
func TestUsualLoopDoesNotReadAhead(t *testing.T) {
	ch, w := pipeChannel(t)
	defer unix.Close(w)
	c, b := newSeqCQ(t, ch, w)
	for i := range 3 {
		if !ch.rd.TryLock() { // a reader holds the channel: a read-ahead would fail
			t.Fatal("the turn is taken")
		}
		c.mustArm(t, NextCompletion)
		ch.rd.Unlock()
		if r := c.arm.(*readFirst); r.again != 0 {
			t.Fatalf("round %d: the arm tried to read the channel", i)
		}
		if !b.complete(t, false) {
			t.Fatalf("round %d: no event", i)
		}
		mustWait(t, ch, c)
	}
	if b.stale != 0 {
		t.Errorf("%d arms ignored", b.stale)
	}
}

// An arm that finds a Wait reading the channel cannot read ahead: the
// Wait's delivery of the CQ's event arms again, so the arm is not lost.
func TestArmWhileAWaitReads(t *testing.T) {
	ch, w := pipeChannel(t)
	defer unix.Close(w)
	c, b := newSeqCQ(t, ch, w)
	c.mustArm(t, NextSolicited)
	if !b.complete(t, true) {
		t.Fatal("no event")
	}
	if !ch.rd.TryLock() { // stands in for a Wait reading the channel
		t.Fatal("the turn is taken")
	}
	c.mustArm(t, NextSolicited)
	c.mustArm(t, NextCompletion) // next wins
	ch.rd.Unlock()
	if b.stale != 2 {
		t.Errorf("%d arms ignored, want 2 (the device had raised the event)", b.stale)
	}
	mustWait(t, ch, c)
	if !b.complete(t, false) {
		t.Fatal("the arms made while a Wait read the channel were lost, or armed solicited only")
	}
	mustWait(t, ch, c)
	if b.complete(t, false) {
		t.Error("an event without a re-arm")
	}
}

// A TryWait that finds a read-ahead holding the channel waits for it (it
// never blocks) and takes the event, as it would have without it.
func TestTryWaitAfterReadAhead(t *testing.T) {
	ch, w := pipeChannel(t)
	defer unix.Close(w)
	c, b := newSeqCQ(t, ch, w)
	c.mustArm(t, NextCompletion)
	b.complete(t, false)
	ch.ahead.Lock() // a read-ahead in progress
	if !ch.rd.TryLock() {
		t.Fatal("the turn is taken")
	}
	type result struct {
		c  *CQ
		ok bool
	}
	done := make(chan result, 1)
	go func() {
		got, ok, _ := ch.TryWait()
		done <- result{got, ok}
	}()
	time.Sleep(20 * time.Millisecond)
	ch.rd.Unlock()
	ch.ahead.Unlock()
	if r := <-done; !r.ok || r.c != c {
		t.Errorf("TryWait during a read-ahead = %v, %v; want the CQ's event", r.c, r.ok)
	}
	c.Ack(c.Unacked())
}

// An arm that reads ahead allocates nothing.
func TestReadAheadAllocatesNothing(t *testing.T) {
	ch, w := pipeChannel(t)
	defer unix.Close(w)
	c, _ := newSeqCQ(t, ch, w)
	c.mustArm(t, NextCompletion)
	if n := testing.AllocsPerRun(100, func() { c.ReqNotify(NextCompletion) }); n != 0 {
		t.Errorf("an arm that reads ahead allocates %v times", n)
	}
}
