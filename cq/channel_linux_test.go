package cq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A channel fd that polls EPOLLERR alone, as a completion channel of a
// disassociated device does (ib_uverbs_event_poll: an empty queue that
// is_closed), makes the runtime's poller answer every later read with
// "not pollable", without calling the read. Wait must report what the fd
// says instead, wrapped as a failed "get cq event".
//
// The stand-in is the write end of a full pipe whose read end is closed:
// pipe_poll gives it EPOLLERR and no EPOLLOUT, and read(2) on it fails
// (EBADF; the kernel's channel says EIO).
func TestWaitOnFailedFD(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	fill := make([]byte, 4096)
	for {
		if _, err := unix.Write(p[1], fill); err != nil {
			if err != unix.EAGAIN {
				t.Fatal(err)
			}
			break
		}
	}
	unix.Close(p[0])
	ch, err := NewChannel(p[1], "test0")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

	// Let the runtime's poller see the EPOLLERR first: then a raw read
	// fails before it calls its function.
	deadline := time.Now().Add(2 * time.Second)
	var rawErr error
	for rawErr == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		rawErr = ch.rc.Read(func(uintptr) bool { return true })
	}
	t.Logf("the runtime's own answer: %v", rawErr)

	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		_, err := ch.Wait(ctx)
		cancel()
		var op *OpError
		if !errors.As(err, &op) || op.Op != "get cq event" || op.Device != "test0" || !errors.Is(err, unix.EBADF) {
			t.Errorf("wait %d: %v; want an *OpError for get cq event test0 wrapping the read's EBADF", i, err)
		}
		if err != nil && strings.Contains(err.Error(), "not pollable") {
			t.Errorf("wait %d: %v: the runtime's words, not the fd's", i, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("wait %d took %v, want at once", i, d)
		}
	}
	if _, err := ch.TryWait(); !errors.Is(err, unix.EBADF) {
		t.Errorf("TryWait: %v, want EBADF", err)
	}
}
