package uverbs_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uverbs"
)

// A context nothing has happened to has no event queued.
func TestTryAsyncEventQuiet(t *testing.T) {
	c := openRXE(t)
	ev, ok, err := c.TryAsyncEvent()
	if err != nil || ok {
		t.Fatalf("TryAsyncEvent on a quiet context = %v, %v, %v; want nothing", ev, ok, err)
	}
	if n := testing.AllocsPerRun(100, func() { c.TryAsyncEvent() }); n != 0 && !testutil.Race {
		t.Errorf("TryAsyncEvent allocates %v times per call, want 0", n)
	}
}

func BenchmarkTryAsyncEvent(b *testing.B) {
	testutil.RequireDevice(b, testutil.DevicePath)
	c, err := uverbs.Open("rxe0")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.TryAsyncEvent(); err != nil {
			b.Fatal(err)
		}
	}
}

func checkWaitErr(t *testing.T, err error, want error) {
	t.Helper()
	var op *uverbs.OpError
	if !errors.As(err, &op) || op.Op != "get async event" || op.Device != "rxe0" || !errors.Is(err, want) {
		t.Errorf("err = %v, want an *OpError for get async event rxe0 wrapping %v", err, want)
	}
}

// A wait ends when its context does, promptly, and the next wait works.
func TestWaitAsyncEventContext(t *testing.T) {
	c := openRXE(t)
	testutil.CheckFDLeak(t)
	for _, tt := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled before", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
		{"cancelled during", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(30*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 30*time.Millisecond)
		}, context.DeadlineExceeded},
		{"deadline again", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 30*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			ev, err := c.WaitAsyncEvent(ctx)
			took := time.Since(start)
			checkWaitErr(t, err, tt.want)
			if err == nil {
				t.Errorf("got event %v", ev)
			}
			if took > 5*time.Second {
				t.Errorf("the wait took %v to end", took)
			}
			t.Logf("%v after %v", err, took)
		})
	}
	// The deadline a cancelled wait left on the fd does not stop a try.
	if _, ok, err := c.TryAsyncEvent(); err != nil || ok {
		t.Errorf("TryAsyncEvent after the waits: %v, %v", ok, err)
	}
}

// One waiter reads at a time; the others still honour their contexts.
func TestWaitAsyncEventConcurrent(t *testing.T) {
	c := openRXE(t)
	first, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	done := make(chan error, 1)
	go func() {
		_, err := c.WaitAsyncEvent(first)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it park
	second, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.WaitAsyncEvent(second)
	checkWaitErr(t, err, context.DeadlineExceeded)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the queued waiter took %v to give up", took)
	}
	cancelFirst()
	select {
	case err := <-done:
		checkWaitErr(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("the first waiter did not end")
	}
}

// Close ends a wait in progress with ErrClosed, not with the runtime's
// "use of closed file"; later calls fail the same way.
func TestWaitAsyncEventClose(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.CheckFDLeak(t)
	c, err := uverbs.Open("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for range 2 { // one parked, one queued behind it
		go func() {
			_, err := c.WaitAsyncEvent(context.Background())
			done <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-done:
			checkWaitErr(t, err, uverbs.ErrClosed)
			if strings.Contains(err.Error(), "use of closed") {
				t.Errorf("err = %q", err)
			}
			t.Logf("%v after %v", err, time.Since(start))
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not end the wait")
		}
	}
	_, err = c.WaitAsyncEvent(context.Background())
	checkWaitErr(t, err, uverbs.ErrClosed)
	_, _, err = c.TryAsyncEvent()
	checkWaitErr(t, err, uverbs.ErrClosed)
}

// setNetdevUp sets or clears IFF_UP on a netdev (ip link set NAME up/down).
func setNetdevUp(t *testing.T, name string, up bool) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		t.Fatalf("SIOCGIFFLAGS %s: %v", name, err)
	}
	flags := ifr.Uint16()
	if up {
		flags |= unix.IFF_UP
	} else {
		flags &^= unix.IFF_UP
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		t.Fatalf("SIOCSIFFLAGS %s: %v", name, err)
	}
}

// waitPort1State polls port 1 until it reaches state.
func waitPort1State(t *testing.T, c *uverbs.Context, state uverbs.PortState) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := c.QueryPort(1)
		if err != nil {
			t.Fatal(err)
		}
		if p.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("port 1 still %v after 10s, want %v", p.State, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitPortEvent waits for an event of type typ on port 1, logging others.
func waitPortEvent(t *testing.T, c *uverbs.Context, typ uverbs.AsyncEventType, since time.Time) uverbs.AsyncEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := c.WaitAsyncEvent(ctx)
		if err != nil {
			t.Fatalf("waiting for %v: %v", typ, err)
		}
		t.Logf("%v after %v", ev, time.Since(since))
		ev.Ack()
		if ev.Type == typ {
			if p, ok := ev.Port(); !ok || p != 1 {
				t.Errorf("%v: port %d, %v; want port 1", ev, p, ok)
			}
			return ev
		}
	}
}

// rxe follows its netdev: d0 going down makes rxe0 report PORT_ERR and
// its port DOWN, d0 coming up PORT_ACTIVE and ACTIVE. Every context gets
// the events, through a wait or a try.
func TestPortEvents(t *testing.T) {
	c := openRXE(t)
	other := openRXE(t)
	if _, err := c.QueryPort(1); err != nil {
		t.Fatal(err)
	}
	before, err := c.GIDTable(1)
	if err != nil {
		t.Fatal(err)
	}
	// Other packages' VM tests use rxe0 after this one: leave d0 up and
	// the port active, with the same GIDs.
	t.Cleanup(func() {
		setNetdevUp(t, "d0", true)
		waitPort1State(t, c, uverbs.PortActive)
		after, err := c.GIDTable(1)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Errorf("GID table after the test: %v, before: %v", after, before)
		}
	})
	// A wait that timed out leaves the next one working.
	short, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := c.WaitAsyncEvent(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("short wait: %v", err)
	}

	start := time.Now()
	setNetdevUp(t, "d0", false)
	waitPortEvent(t, c, uverbs.EventPortErr, start)
	t.Logf("PORT_ERR after %v", time.Since(start))
	p, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != uverbs.PortDown || p.PhysState != uverbs.PhysDisabled {
		t.Errorf("port 1 with d0 down: %v, %v; want PORT_DOWN, DISABLED", p.State, p.PhysState)
	}
	// The other context gets it too, through a wait. Before d0 comes up:
	// the kernel hands each port event to the contexts, one after the
	// other, from a work item of the event's own (ib_cache_event_task),
	// and two events' work items may run at once, so a context can read
	// two quick events out of order (on 6.12 the other context once read
	// PORT_ACTIVE before PORT_ERR when d0 came up at once).
	waitPortEvent(t, other, uverbs.EventPortErr, start)

	start = time.Now()
	setNetdevUp(t, "d0", true)
	waitPortEvent(t, c, uverbs.EventPortActive, start)
	t.Logf("PORT_ACTIVE after %v", time.Since(start))
	if p, err := c.QueryPort(1); err != nil || p.State != uverbs.PortActive || p.PhysState != uverbs.PhysLinkUp {
		t.Errorf("port 1 with d0 up: %+v, %v", p, err)
	}

	// The other context gets PORT_ACTIVE too, and only that (its
	// PORT_ERR was read above), through a try or a wait. It may come a
	// moment after c's: what is queued is taken with tries, then the
	// rest waited for (up to 10 s).
	var got []uverbs.AsyncEventType
	for {
		ev, ok, err := other.TryAsyncEvent()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		ev.Ack()
		if ev.Type == uverbs.EventPortErr || ev.Type == uverbs.EventPortActive {
			got = append(got, ev.Type)
		}
	}
	ctx, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()
	for len(got) < 1 {
		ev, err := other.WaitAsyncEvent(ctx)
		if err != nil {
			break
		}
		ev.Ack()
		if ev.Type == uverbs.EventPortErr || ev.Type == uverbs.EventPortActive {
			got = append(got, ev.Type)
		}
	}
	if len(got) != 1 || got[0] != uverbs.EventPortActive {
		t.Errorf("the other context read %v after its PORT_ERR, want [port active]", got)
	}
}

// asyncEventDesc builds a struct ib_uverbs_async_event_desc.
func asyncEventDesc(element uint64, typ uverbs.AsyncEventType) []byte {
	b := make([]byte, 16)
	binary.NativeEndian.PutUint64(b, element)
	binary.NativeEndian.PutUint32(b[8:], uint32(typ))
	return b
}

// Ack counts events per object, through the counter the object got when
// it was tracked; it is one atomic add. The kernel's fd is stood in for
// by a pipe, so this runs anywhere.
func TestAsyncEventAck(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	c := uverbs.NewAsyncTestContext()
	cqAcks := c.TrackAsync(uverbs.ElementCQ, 7)
	qpAcks := c.TrackAsync(uverbs.ElementQP, 7)
	read := func(element uint64, typ uverbs.AsyncEventType) uverbs.AsyncEvent {
		t.Helper()
		if _, err := unix.Write(p[1], asyncEventDesc(element, typ)); err != nil {
			t.Fatal(err)
		}
		ev, ok, err := c.ReadAsyncEventFrom(p[0])
		if err != nil || !ok || ev.Type != typ || ev.Element != element {
			t.Fatalf("read %v, %v, %v; want %v on %d", ev, ok, err, typ, element)
		}
		return ev
	}
	read(7, uverbs.EventCQErr).Ack()
	read(7, uverbs.EventCQErr).Ack()
	read(7, uverbs.EventQPFatal).Ack()
	read(8, uverbs.EventCQErr).Ack()      // an unknown CQ
	read(7, uverbs.EventPortActive).Ack() // port 7: nothing to count
	if cqAcks.Load() != 2 || qpAcks.Load() != 1 {
		t.Errorf("acks: CQ %d, QP %d; want 2, 1", cqAcks.Load(), qpAcks.Load())
	}
	ev := read(7, uverbs.EventCQErr)
	if n := testing.AllocsPerRun(100, ev.Ack); n != 0 {
		t.Errorf("Ack allocates %v times", n)
	}
	c.UntrackAsync(uverbs.ElementCQ, 7)
	read(7, uverbs.EventCQErr).Ack() // read after the untrack: counts nowhere
	if cqAcks.Load() != 2+101 {
		t.Errorf("CQ acks %d, want 103", cqAcks.Load())
	}

	if ev, ok, err := c.ReadAsyncEventFrom(p[0]); ok || err != nil {
		t.Errorf("empty pipe: %v, %v, %v", ev, ok, err)
	}
	buf := asyncEventDesc(1, uverbs.EventPortErr)
	if n := testing.AllocsPerRun(100, func() {
		unix.Write(p[1], buf)
		c.ReadAsyncEventFrom(p[0])
	}); n != 0 && !testutil.Race {
		t.Errorf("reading an event allocates %v times", n)
	}
	unix.Write(p[1], buf[:8])
	if _, _, err := c.ReadAsyncEventFrom(p[0]); !errors.Is(err, unix.EIO) {
		t.Errorf("a short read: %v, want EIO", err)
	}
}
