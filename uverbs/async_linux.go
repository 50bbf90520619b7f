package uverbs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/fdturn"
)

// asyncEvents is a Context's side of its async event fd (c.async, opened
// non-blocking): how events are read, and the ack counters of the objects
// events can name. Its zero value is ready; the fd is bound on first use.
type asyncEvents struct {
	once    sync.Once
	initErr error
	rd      fdturn.Reader      // c.async's: its turn's holder owns the fd's read deadline
	fd      int                // c.async's number, for TryAsyncEvent under c.use
	readFn  func(uintptr) bool // = s.readWait, bound once: a method value allocates at each use

	// Guarded by holding the turn: the waiter's buffer and results.
	wbuf [asyncEventSize]byte
	wev  AsyncEvent
	werr error

	// mu is held for reading across each event's read and the lookup of
	// its object, and for writing by trackAsync and untrackAsync. So an
	// object that is untracked after its destroy has every event read
	// before the destroy counted, and no event read after it (the kernel
	// drops those).
	mu   sync.RWMutex
	acks map[asyncKey]*atomic.Uint32 // guarded by mu

	// onEvent, set at Open, sees every event read (a CQ_ERR breaks its CQ).
	onEvent func(AsyncEvent)

	// fatal is set once DEVICE_FATAL has been read: the end of the event
	// stream. A disassociated device queues it on the async fd and nothing
	// after it, but the kernel keeps the fd open (the queue is freed only
	// at release, uverbs_async_event_release), so a read after it would
	// wait forever. Later waits fail with errDeviceFatal instead.
	fatal atomic.Bool
}

// errDeviceFatal is the error of every async event wait after
// DEVICE_FATAL was read.
var errDeviceFatal = fmt.Errorf("the device reported DEVICE_FATAL, its last event: %w", unix.EIO)

// asyncKey names an object async events can name.
type asyncKey struct {
	kind   ElementKind
	handle uint64
}

// init binds the async fd once.
func (s *asyncEvents) init(f *os.File) error {
	s.once.Do(func() {
		s.readFn = s.readWait
		err := s.rd.Init(f)
		if err == nil {
			err = s.rd.Control(func(fd uintptr) { s.fd = int(fd) })
		}
		s.initErr = err
	})
	return s.initErr
}

// read reads at most one event from fd without blocking, and finds the
// ack counter of the object it names. ok is false when none is queued.
func (s *asyncEvents) read(fd int, buf *[asyncEventSize]byte) (ev AsyncEvent, ok bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int
	for {
		n, err = unix.Read(fd, buf[:])
		if err != unix.EINTR {
			break
		}
	}
	switch {
	case err == unix.EAGAIN:
		return AsyncEvent{}, false, nil
	case err != nil:
		return AsyncEvent{}, false, err // EIO once the device is gone
	}
	if ev, err = parseAsyncEvent(buf[:n]); err != nil {
		return AsyncEvent{}, false, err
	}
	if ev.Type == EventDeviceFatal {
		s.fatal.Store(true)
	}
	if k := ev.Kind(); k >= ElementCQ && s.acks != nil {
		ev.acks = s.acks[asyncKey{k, ev.Element}]
	}
	if s.onEvent != nil {
		s.onEvent(ev)
	}
	return ev, true, nil
}

// readWait is the waiter's read: false (park) while nothing is queued.
// After DEVICE_FATAL nothing more comes: it fails at once.
func (s *asyncEvents) readWait(fd uintptr) bool {
	if s.fatal.Load() {
		s.werr = errDeviceFatal
		return true
	}
	ev, ok, err := s.read(int(fd), &s.wbuf)
	switch {
	case err != nil:
		s.werr = err
	case !ok:
		return false
	default:
		s.wev = ev
	}
	return true
}

// TryAsyncEvent returns the next async event of the device if one is
// queued (ibv_get_async_event on a non-blocking fd), and false if none
// is. It never blocks and allocates nothing, and may run beside
// WaitAsyncEvent; acknowledge what it returns with AsyncEvent.Ack.
func (c *Context) TryAsyncEvent() (AsyncEvent, bool, error) {
	const op = "get async event"
	if err := c.use(op); err != nil { // c.async stays open, its number ours, until done
		return AsyncEvent{}, false, err
	}
	defer c.done()
	s := &c.events
	if err := s.init(c.async); err != nil {
		return AsyncEvent{}, false, c.opErr(op, err)
	}
	if s.fatal.Load() {
		return AsyncEvent{}, false, c.opErr(op, errDeviceFatal)
	}
	var buf [asyncEventSize]byte
	ev, ok, err := s.read(s.fd, &buf)
	if err != nil {
		return AsyncEvent{}, false, c.opErr(op, err)
	}
	if ok && ev.Type == EventDeviceFatal {
		// Nothing more will come: wake a WaitAsyncEvent parked beside us.
		s.rd.Kick()
	}
	return ev, ok, nil
}

// WaitAsyncEvent waits for the next async event of the device
// (ibv_get_async_event) and returns it; acknowledge it with
// AsyncEvent.Ack. The wait parks the goroutine on the Go runtime's
// poller, not an OS thread.
//
// It ends early with an error that wraps ctx.Err() (context.Canceled or
// context.DeadlineExceeded) when ctx is done, and with one that wraps
// ErrClosed when the Context is closed, before or during the wait.
// DEVICE_FATAL is the last event a device reports (one whose driver was
// removed queues it, then nothing): once it has been returned, every
// later wait, and TryAsyncEvent, fails at once with an error wrapping EIO.
// Concurrent calls wait their turn: one at a time reads, while the others
// still honour their own ctx.
//
// Every Context of a device gets each of its events. The kernel hands a
// port event to the Contexts one after another from a work item of that
// event's own, and two events' work items may run at once: two quick
// changes of a port (PORT_ERR, then PORT_ACTIVE) can reach two Contexts
// in different orders. A program that follows a port's state should read
// it with QueryPort when an event comes, not infer it from the order.
func (c *Context) WaitAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	const op = "get async event"
	if c.closed.Load() {
		return AsyncEvent{}, c.opErr(op, ErrClosed)
	}
	s := &c.events
	if err := s.init(c.async); err != nil {
		return AsyncEvent{}, c.asyncErr(op, err)
	}
	if err := s.rd.Lock(ctx); err != nil {
		return AsyncEvent{}, c.opErr(op, err)
	}
	defer s.rd.Unlock()
	if c.closed.Load() {
		return AsyncEvent{}, c.opErr(op, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return AsyncEvent{}, c.opErr(op, err)
	}
	s.wev, s.werr = AsyncEvent{}, nil
	// The callback reads before parking, and fails once DEVICE_FATAL was
	// read: TryAsyncEvent sets fatal, then kicks, so a wait that began
	// before the kick is woken by it and one after it sees fatal.
	err := s.rd.Wait(ctx, s.readFn)
	switch {
	case err == nil && s.werr == nil:
		return s.wev, nil
	case err == nil:
		err = s.werr
	case err == ctx.Err(): // the wait's context ended it
	case errors.Is(err, os.ErrDeadlineExceeded) && s.fatal.Load(): // TryAsyncEvent read DEVICE_FATAL
		err = errDeviceFatal
	}
	return AsyncEvent{}, c.asyncErr(op, err)
}

// asyncErr wraps an error of the async fd: after Close, the runtime says
// "use of closed file", which is not ErrClosed; our flag decides.
func (c *Context) asyncErr(op string, err error) error {
	if c.closed.Load() {
		err = ErrClosed
	}
	return c.opErr(op, err)
}

// trackAsync makes events about the object of kind k with user handle h
// carry an ack counter, which it returns: the object keeps it to compare
// with the async_events_reported its destroy returns. Call it before the
// create command, so that no event read between the create and the
// track goes uncounted. Handles must be unique per kind (a counter, like
// the CQs'); a second object with the same key replaces the first.
func (c *Context) trackAsync(k ElementKind, h uint64) *atomic.Uint32 {
	s := &c.events
	n := new(atomic.Uint32)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.acks == nil {
		s.acks = map[asyncKey]*atomic.Uint32{}
	}
	s.acks[asyncKey{k, h}] = n
	return n
}

// untrackAsync forgets the object of kind k with user handle h: call it
// once the object's destroy has succeeded (the kernel then drops its
// unread events), not before; or when its create failed.
func (c *Context) untrackAsync(k ElementKind, h uint64) {
	s := &c.events
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.acks, asyncKey{k, h})
}
