package cq

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"golang.org/x/sys/unix"
)

// A channel fd that polls EPOLLERR alone, as a completion channel of a
// disassociated device does (ib_uverbs_event_poll: an empty queue that
// is_closed), must make Wait report what the fd says, wrapped as a failed
// "get cq event", at once: not park, and not answer with the runtime's
// "not pollable" (which it gave when the fd itself was on the runtime's
// poller).
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
	ch, err := newChannel(p[1], "test0")
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

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
	if _, _, err := ch.TryWait(); !errors.Is(err, unix.EBADF) {
		t.Errorf("TryWait: %v, want EBADF", err)
	}
}

// pipeChannel is a Channel on the read end of a pipe, as the mlx5 model's
// channels are; events are written to the returned write end.
func pipeChannel(t *testing.T) (*Channel, int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	ch, err := newChannel(p[0], "test0")
	if err != nil {
		unix.Close(p[1])
		t.Fatal(err)
	}
	return ch, p[1]
}

// untilParked waits until a goroutine is parked on the runtime's poller
// in a Channel's Wait.
func untilParked(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[IO wait") && strings.Contains(g, "cq.(*Channel).park") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no Wait parked within 5 s")
		}
	}
}

// watchers lists the epoll instances of this process that watch fd, read
// from /proc/self/fdinfo ("tfd:" lines): the runtime's own poller among
// them, had the fd been put on it.
func watchers(t *testing.T, fd int) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue // closed since the listing
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "tfd:" && f[1] == strconv.Itoa(fd) {
				eps = append(eps, e.Name())
			}
		}
	}
	return eps
}

// A channel is one fd, on the runtime's poller from its creation; Waits
// park there and make no fd of their own.
func TestChannelOneFD(t *testing.T) {
	ch, w := pipeChannel(t)
	defer unix.Close(w)
	c, _ := newFakeOn(t, ch)
	if got := watchers(t, ch.FD()); len(got) != 1 {
		t.Errorf("a new channel's fd is watched by epoll fds %v, want the runtime's poller alone", got)
	}
	before := epolls(t)
	done := make(chan error, 1)
	go func() {
		_, err := ch.Wait(context.Background())
		done <- err
	}()
	untilParked(t)
	if got := epolls(t); got != before {
		t.Errorf("a parked Wait: %d epoll instances, want %d (none made)", got, before)
	}
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], c.EventHandle())
	if _, err := unix.Write(w, b[:]); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Ack(1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
}

// epolls counts this process's epoll instances.
func epolls(t *testing.T) int {
	t.Helper()
	return testutil.FDsTo(t, "anon_inode:[eventpoll]")
}

// A Wait or TryWait that finds events queued reads one of them (one
// read(2) an event, as ibv_get_cq_event), and leaves the rest in the fd
// for the next call; a Wait woken from a park reads every queued event,
// as edge-triggered polling asks. The pipe's events are written three at
// once, in one write(2).
func TestWakeUpReadsEveryEvent(t *testing.T) {
	ch, w := pipeChannel(t)
	defer unix.Close(w)
	defer ch.Close()
	c, _ := newFakeOn(t, ch)
	defer c.Close()
	var three [24]byte
	for i := range 3 {
		binary.NativeEndian.PutUint64(three[8*i:], c.EventHandle())
	}
	left := func(what string, want int) {
		t.Helper()
		// The kernel writes an int, 32 bits: IoctlGetInt's Go int would
		// read it shifted on a 64-bit big-endian machine.
		n, err := unix.IoctlGetUint32(ch.FD(), unix.TIOCINQ)
		if err != nil {
			t.Fatal(err)
		}
		if n != uint32(8*want) {
			t.Errorf("%s: %d bytes left in the fd, want %d events (%d bytes)", what, n, want, 8*want)
		}
	}
	wait := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if got, err := ch.Wait(ctx); got != c || err != nil {
			t.Fatalf("%s: Wait = %v, %v; want the CQ", what, got, err)
		}
		c.Ack(1)
	}
	tryWait := func(what string) {
		t.Helper()
		if got, ok, err := ch.TryWait(); got != c || !ok || err != nil {
			t.Fatalf("%s: TryWait = %v, %v, %v; want the CQ", what, got, ok, err)
		}
		c.Ack(1)
	}
	empty := func(what string) {
		t.Helper()
		if _, ok, err := ch.TryWait(); ok || err != nil {
			t.Errorf("%s: TryWait = %v, %v; want false, nil", what, ok, err)
		}
	}

	if _, err := unix.Write(w, three[:]); err != nil {
		t.Fatal(err)
	}
	wait("three queued")
	left("a Wait that found three queued", 2)
	tryWait("two queued")
	left("then a TryWait", 1)
	wait("one queued")
	left("then a Wait", 0)
	empty("all three taken")

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := ch.Wait(ctx)
		if err == nil && got != c {
			err = errors.New("an event for another CQ")
		}
		done <- err
	}()
	untilParked(t)
	if _, err := unix.Write(w, three[:]); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("parked Wait: %v", err)
	}
	c.Ack(1)
	left("a Wait woken by three", 0)
	tryWait("the second, read by the wake-up")
	wait("the third, read by the wake-up")
	empty("all three taken")
	if n := c.Unacked(); n != 0 {
		t.Errorf("%d events unacked, want 0", n)
	}
}

// Close wakes a parked Wait (ErrClosed) and returns only after it has
// let go of the fd; a second Close says ErrClosed.
func TestChannelCloseWakesWait(t *testing.T) {
	ch, w := pipeChannel(t)
	defer unix.Close(w)
	done := make(chan error, 1)
	go func() {
		_, err := ch.Wait(context.Background())
		done <- err
	}()
	untilParked(t)
	fd := ch.FD()
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("the parked Wait: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close left a Wait parked")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("the channel's fd after Close: %v, want EBADF (closed)", err)
	}
	if err := ch.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
}

// Close racing Waits (parked, cancelled, woken by events) and TryWaits:
// every call returns, with its context's error, nothing or ErrClosed;
// nothing hangs, and the channel's fd is closed.
func TestChannelCloseRaces(t *testing.T) {
	for round := range 20 {
		ch, w := pipeChannel(t)
		// Events name no CQ (a CQ cannot be destroyed with events read
		// and not acknowledged, nor the channel closed with a CQ on it):
		// Wait reads and drops them, and parks again.
		const h = 1 << 62
		fd := ch.FD()
		stop := make(chan struct{})
		stopped := func() bool {
			select {
			case <-stop:
				return true
			default:
				return false
			}
		}
		done := make(chan error, 8)
		for g := range 6 {
			go func() {
				for !stopped() {
					var err error
					if g%2 == 0 {
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(g)*time.Millisecond)
						_, err = ch.Wait(ctx)
						cancel()
					} else {
						_, _, err = ch.TryWait()
					}
					switch {
					case err == nil, errors.Is(err, context.DeadlineExceeded):
					case errors.Is(err, ErrClosed):
						done <- nil
						return
					default:
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
		go func() {
			var b [8]byte
			binary.NativeEndian.PutUint64(b[:], h)
			for !stopped() {
				unix.Write(w, b[:])
				time.Sleep(100 * time.Microsecond)
			}
			done <- nil
		}()
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if err := ch.Close(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		for range 7 {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: a call did not return after Close", round)
			}
		}
		unix.Close(w)
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
			t.Errorf("round %d: fd %d still open after Close (%v)", round, fd, err)
		}
	}
}

// Each event goes to the CQ it names, however the CQs' events interleave
// (deliver keeps the last one it looked up), and an event that names a
// CQ closed since, the one kept among them, is dropped.
func TestEventsReachTheirCQ(t *testing.T) {
	ch, w := pipeChannel(t)
	defer unix.Close(w)
	a, _ := newFakeOn(t, ch)
	b, _ := newFakeOn(t, ch)
	event := func(c *CQ) {
		var buf [8]byte
		binary.NativeEndian.PutUint64(buf[:], c.EventHandle())
		if _, err := unix.Write(w, buf[:]); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range []*CQ{a, a, b, a, b, b} {
		event(c)
		got, err := ch.Wait(context.Background())
		if err != nil || got != c {
			t.Fatalf("event %d: Wait = %v, %v; want CQ %d", i, got, err, c.EventHandle())
		}
		got.Ack(1)
	}
	event(b) // b is the one kept
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	event(a)
	if got, err := ch.Wait(context.Background()); err != nil || got != a {
		t.Fatalf("Wait after b closed = %v, %v; want a (b's event dropped)", got, err)
	}
	a.Ack(1)
	if got, ok, err := ch.TryWait(); ok || err != nil {
		t.Errorf("TryWait = %v, %v, %v; want nil, false, nil", got, ok, err)
	}
}
