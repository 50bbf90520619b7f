package cq

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Acking more events than were delivered and not yet acknowledged is an
// error that changes nothing: it banks no credit, so a later event still
// keeps Close from destroying the CQ (issue #36: Ack(2) after one event
// hid the next one, and Close succeeded).
func TestAckMoreThanDelivered(t *testing.T) {
	ch, w := pipeChannel(t)
	defer unix.Close(w)
	q, _ := newFakeOn(t, ch)
	event := func() {
		var buf [8]byte
		binary.NativeEndian.PutUint64(buf[:], q.EventHandle())
		if _, err := unix.Write(w, buf[:]); err != nil {
			t.Fatal(err)
		}
		if got, err := ch.Wait(context.Background()); err != nil || got != q {
			t.Fatalf("Wait = %v, %v", got, err)
		}
	}
	event()
	for _, n := range []int{2, -1} {
		err := q.Ack(n)
		var op *OpError
		if !errors.As(err, &op) || op.Op != "ack cq events" || op.Device != "fake0" || !errors.Is(err, unix.EINVAL) {
			t.Errorf("Ack(%d) with 1 event unacknowledged: %v, want an *OpError ack cq events fake0 wrapping EINVAL", n, err)
		}
		if err != nil && strings.Count(err.Error(), " cq ") != 1 {
			t.Errorf("Ack(%d): %q names more than one verb", n, err)
		}
	}
	if n := q.Unacked(); n != 1 {
		t.Errorf("Unacked after the refused Acks = %d, want 1", n)
	}
	if err := q.Ack(1); err != nil {
		t.Errorf("Ack(1): %v", err)
	}
	if err := q.Ack(0); err != nil {
		t.Errorf("Ack(0): %v", err)
	}
	event() // no credit banked: this one is unacknowledged
	if n := q.Unacked(); n != 1 {
		t.Errorf("Unacked after a second event = %d, want 1", n)
	}
	if err := q.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("Close with an event unacknowledged: %v, want EBUSY", err)
	}
	if err := q.Ack(1); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Ack after Close: %v, want ErrClosed", err)
	}
}

// Ack stays one lock-free atomic operation, with nothing allocated.
func TestAckAllocatesNothing(t *testing.T) {
	ch, w := pipeChannel(t)
	defer unix.Close(w)
	q, _ := newFakeOn(t, ch)
	var buf [8]byte
	binary.NativeEndian.PutUint64(buf[:], q.EventHandle())
	for range 200 {
		if _, err := unix.Write(w, buf[:]); err != nil {
			t.Fatal(err)
		}
	}
	n := testing.AllocsPerRun(100, func() {
		if _, _, err := ch.TryWait(); err != nil {
			t.Fatal(err)
		}
		if err := q.Ack(1); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("TryWait and Ack: %v allocations, want 0", n)
	}
}
