package uverbs

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pipeContext returns a Context whose async fd is the read end of a pipe,
// and the write end, which plays the kernel.
func pipeContext(t *testing.T) (*Context, int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	c := &Context{dev: Device{Name: "test0"}, async: os.NewFile(uintptr(p[0]), "test0-async")}
	t.Cleanup(func() {
		c.async.Close()
		unix.Close(p[1])
	})
	return c, p[1]
}

func queueEvents(t *testing.T, w int, evs ...AsyncEventType) {
	t.Helper()
	for _, e := range evs {
		if _, err := unix.Write(w, desc(1, uint32(e))); err != nil {
			t.Fatal(err)
		}
	}
}

func checkFatalErr(t *testing.T, what string, err error) {
	t.Helper()
	var op *OpError
	if !errors.As(err, &op) || op.Op != "get async event" || op.Device != "test0" || !errors.Is(err, unix.EIO) {
		t.Errorf("%s: %v; want an *OpError for get async event test0 wrapping EIO", what, err)
	}
}

// DEVICE_FATAL ends the stream: a disassociated device queues it on the
// async fd and nothing after it, and the kernel keeps the fd open
// (uverbs_async_event_release: "The user knows it has reached the end of
// the event stream when it sees IB_EVENT_DEVICE_FATAL"). Events before it
// are delivered; every wait after it fails at once with EIO instead of
// waiting for an event that cannot come.
func TestDeviceFatalEndsAsyncEvents(t *testing.T) {
	c, w := pipeContext(t)
	queueEvents(t, w, EventPortErr, EventDeviceFatal)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ev, err := c.WaitAsyncEvent(ctx); err != nil || ev.Type != EventPortErr {
		t.Fatalf("first event: %v, %v; want port error", ev, err)
	}
	if ev, ok, err := c.TryAsyncEvent(); err != nil || !ok || ev.Type != EventDeviceFatal {
		t.Fatalf("second event: %v, %v, %v; want DEVICE_FATAL", ev, ok, err)
	}
	start := time.Now()
	_, err := c.WaitAsyncEvent(ctx)
	checkFatalErr(t, "wait after DEVICE_FATAL", err)
	if d := time.Since(start); d > time.Second {
		t.Errorf("wait after DEVICE_FATAL took %v, want at once", d)
	}
	_, ok, err := c.TryAsyncEvent()
	if ok {
		t.Error("TryAsyncEvent after DEVICE_FATAL returned an event")
	}
	checkFatalErr(t, "TryAsyncEvent after DEVICE_FATAL", err)
	// Close still wins over the device's end.
	c.closed.Store(true)
	if _, err := c.WaitAsyncEvent(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("wait after close: %v, want ErrClosed", err)
	}
}

// A wait parked while TryAsyncEvent takes the DEVICE_FATAL must not stay
// parked: nothing else will come. Whichever reads it, the event is
// delivered once, and the other ends with EIO (TryAsyncEvent may also find
// nothing, if the waiter's read was under way).
func TestDeviceFatalWakesParkedWait(t *testing.T) {
	kicked := 0
	for i := range 20 {
		c, w := pipeContext(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		type result struct {
			ev  AsyncEvent
			err error
		}
		done := make(chan result, 1)
		go func() {
			ev, err := c.WaitAsyncEvent(ctx)
			done <- result{ev, err}
		}()
		time.Sleep(10 * time.Millisecond) // let it park
		queueEvents(t, w, EventDeviceFatal)
		ev, ok, terr := c.TryAsyncEvent()
		var r result
		select {
		case r = <-done:
		case <-time.After(5 * time.Second):
			cancel()
			t.Fatalf("round %d: the wait is still parked 5 s after DEVICE_FATAL", i)
		}
		cancel()
		waiterGot := r.err == nil && r.ev.Type == EventDeviceFatal
		tryGot := terr == nil && ok && ev.Type == EventDeviceFatal
		switch {
		case waiterGot == tryGot:
			t.Fatalf("round %d: DEVICE_FATAL delivered to the waiter %v (%v) and to TryAsyncEvent %v (%v, %v)",
				i, waiterGot, r.err, tryGot, ok, terr)
		case tryGot:
			kicked++
			checkFatalErr(t, "the parked wait", r.err)
		case terr != nil:
			checkFatalErr(t, "TryAsyncEvent beside the waiter", terr)
		}
	}
	t.Logf("TryAsyncEvent took the DEVICE_FATAL and woke the parked wait in %d of 20 rounds", kicked)
}
