package uverbs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"weak"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/fdturn"
)

// asyncEvents is a Context's side of its async event fd (c.async, opened
// non-blocking): how events are read, and the ack counters of the objects
// events can name. Its zero value is ready; the fd is bound on first use,
// which Open makes at once.
//
// A watcher goroutine reads the fd as soon as the Context is open,
// parked on the Go runtime's poller while nothing is queued, whether or
// not the application ever asks for an event: so a CQ_ERR breaks its CQ,
// and a DEVICE_FATAL every CQ and QP of the Context (onEvent), even in a
// program that never reads async events. What it reads waits in a queue
// for WaitAsyncEvent and TryAsyncEvent. The watcher holds the Context
// only weakly, so a forgotten Context is still collected (its cleanup
// closes the async fd, which ends the watcher).
type asyncEvents struct {
	once    sync.Once
	initErr error
	q       atomic.Pointer[asyncQueue] // set by init; the watcher's, which must not reach the Context
	fd      int                        // c.async's number, for TryAsyncEvent under c.use

	// mu is held for reading across each event's read and the lookup of
	// its object, and for writing by trackAsync and untrackAsync. So an
	// object that is untracked after its destroy has every event read
	// before the destroy counted, and no event read after it (the kernel
	// drops those).
	mu   sync.RWMutex
	acks map[asyncKey]*atomic.Uint32 // guarded by mu

	// onEvent, set at Open, sees every event read (a CQ_ERR breaks its
	// CQ, a DEVICE_FATAL the Context's data path), before it is queued or
	// returned, and without mu.
	onEvent func(AsyncEvent)

	// fatal is set once DEVICE_FATAL has been read, before onEvent sees
	// it: the end of the event stream. A disassociated device queues it on
	// the async fd and nothing after it, but the kernel keeps the fd open
	// (the queue is freed only at release, uverbs_async_event_release), so
	// nothing reads it again. NewCQ and NewQP read it after their object
	// joins the Context, so one the DEVICE_FATAL missed fails at once.
	fatal atomic.Bool
}

// asyncQueue holds the events read and not yet returned. Its fields are
// guarded by mu, which is also held across every read of the fd (the
// watcher's and TryAsyncEvent's), so events come out in the kernel's
// order.
type asyncQueue struct {
	rd     fdturn.Reader // the async fd's: the watcher holds its turn
	mu     sync.Mutex
	events []AsyncEvent // read, not yet returned, oldest first
	lost   uint64       // events dropped because the queue was full
	// fatalOut is set once DEVICE_FATAL was returned: later calls fail
	// with ErrDeviceFatal.
	fatalOut bool
	// ended is set when the watcher stopped (the fd closed or failed, or
	// DEVICE_FATAL), with the read error in err.
	ended bool
	err   error
	// wake is closed, and forgotten, when an event is queued or the
	// watcher ends: parked waits select on it.
	wake chan struct{}
	buf  [asyncEventSize]byte // the watcher's
}

// maxQueuedAsync bounds the queue of a program that never reads async
// events: beyond it the oldest are dropped (each about a port, a device,
// or an object that has long been told: a CQ_ERR has broken its CQ
// already).
const maxQueuedAsync = 4096

// ErrDeviceFatal is the error of a Context whose device failed or went
// away (the async event DEVICE_FATAL: a hardware error, or the driver
// removed and the kernel disassociated the Context). The Context's async
// watcher reads the event as it comes, whether or not the program ever
// asks for async events, and from then on every Poll of its CQs fails
// with it once Poll has handed out what the ring still held, ReqNotify
// at once, and so do PostSend, PostSendInline and PostRecv on its QPs,
// which post nothing: the device will complete nothing more. Every
// async event wait after DEVICE_FATAL, the last event a device reports,
// fails with it too. Commands (Modify, AllocPD, the queries, …) fail
// with the kernel's EIO. Close everything on the Context, then the
// Context; calls after Close return ErrClosed. It wraps EIO.
var ErrDeviceFatal = fmt.Errorf("device fatal: the device failed or was removed (async event DEVICE_FATAL): %w", unix.EIO)

// asyncKey names an object async events can name.
type asyncKey struct {
	kind   ElementKind
	handle uint64
}

// init binds the async fd once and starts the watcher.
func (s *asyncEvents) init(c *Context) error {
	s.once.Do(func() {
		q := &asyncQueue{}
		err := q.rd.Init(c.async)
		if err == nil {
			err = q.rd.Control(func(fd uintptr) { s.fd = int(fd) })
		}
		if s.initErr = err; err != nil {
			return
		}
		s.q.Store(q)
		q.rd.Lock(context.Background()) // the watcher's for good
		go q.watch(weak.Make(c))
	})
	return s.initErr
}

// watch reads the async fd until it is closed or fails, or DEVICE_FATAL
// came, parked on the runtime's poller while nothing is queued.
func (q *asyncQueue) watch(wc weak.Pointer[Context]) {
	defer q.rd.Unlock()
	var rerr error
	read := func(fd uintptr) bool {
		c := wc.Value()
		if c == nil {
			return true // the Context was collected
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		for !c.events.fatal.Load() {
			ev, ok, err := c.events.read(int(fd), &q.buf)
			switch {
			case err != nil:
				rerr = err
				return true
			case !ok:
				return false // read until EAGAIN: park
			}
			q.push(ev)
		}
		return true
	}
	err := q.rd.Wait(context.Background(), read)
	if err == nil {
		err = rerr
	}
	q.mu.Lock()
	q.ended, q.err = true, err
	q.wakeAll()
	q.mu.Unlock()
}

// push queues ev and wakes the waits; mu is held.
func (q *asyncQueue) push(ev AsyncEvent) {
	if len(q.events) >= maxQueuedAsync {
		q.events = q.events[1:]
		q.lost++
	}
	q.events = append(q.events, ev)
	q.wakeAll()
}

// wakeAll wakes every parked wait; mu is held.
func (q *asyncQueue) wakeAll() {
	if q.wake != nil {
		close(q.wake)
		q.wake = nil
	}
}

// pop returns the oldest queued event; mu is held.
func (q *asyncQueue) pop() (AsyncEvent, bool) {
	if len(q.events) == 0 {
		return AsyncEvent{}, false
	}
	ev := q.events[0]
	q.events[0] = AsyncEvent{}
	q.events = q.events[1:]
	if ev.Type == EventDeviceFatal {
		q.fatalOut = true
	}
	return ev, true
}

// read reads at most one event from fd without blocking, finds the ack
// counter of the object it names, and tells onEvent of it. ok is false
// when none is queued. onEvent runs after mu is given back: a
// DEVICE_FATAL takes every QP's post locks, and QP.Close holds those
// while it takes mu (untrackAsync).
func (s *asyncEvents) read(fd int, buf *[asyncEventSize]byte) (ev AsyncEvent, ok bool, err error) {
	ev, ok, err = s.readOne(fd, buf)
	if ok && s.onEvent != nil {
		s.onEvent(ev)
	}
	return ev, ok, err
}

// readOne is read but for onEvent, under mu.
func (s *asyncEvents) readOne(fd int, buf *[asyncEventSize]byte) (ev AsyncEvent, ok bool, err error) {
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
	return ev, true, nil
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
	if err := s.init(c); err != nil {
		return AsyncEvent{}, false, c.opErr(op, err)
	}
	q := s.q.Load()
	q.mu.Lock()
	defer q.mu.Unlock()
	if ev, ok := q.pop(); ok {
		return ev, true, nil
	}
	switch {
	case q.fatalOut:
		return AsyncEvent{}, false, c.opErr(op, ErrDeviceFatal)
	case q.ended && q.err != nil:
		return AsyncEvent{}, false, c.asyncErr(op, q.err)
	case q.ended || s.fatal.Load():
		return AsyncEvent{}, false, nil
	}
	// Nothing queued: read the fd, in case the watcher has not yet. The
	// queue's lock orders this read with the watcher's.
	var buf [asyncEventSize]byte
	ev, ok, err := s.read(s.fd, &buf)
	if err != nil {
		return AsyncEvent{}, false, c.opErr(op, err)
	}
	if ok && ev.Type == EventDeviceFatal {
		q.fatalOut = true
		q.wakeAll() // nothing more will come: parked waits end
	}
	return ev, ok, nil
}

// WaitAsyncEvent waits for the next async event of the device
// (ibv_get_async_event) and returns it; acknowledge it with
// AsyncEvent.Ack. The wait parks the goroutine, not an OS thread: the
// Context's watcher reads the fd on the Go runtime's poller.
//
// It ends early with an error that wraps ctx.Err() (context.Canceled or
// context.DeadlineExceeded) when ctx is done, and with one that wraps
// ErrClosed when the Context is closed, before or during the wait.
// DEVICE_FATAL is the last event a device reports (one whose driver was
// removed queues it, then nothing): once it has been returned, every
// later wait, and TryAsyncEvent, fails at once with an error wrapping
// ErrDeviceFatal (and so EIO). Concurrent calls each take a different
// event, and each honours its own ctx.
//
// The Context reads its events as they come, whether or not anything
// waits for them, and acts on two before it queues them: a CQ_ERR breaks
// its CQ (ErrCQOverrun), a DEVICE_FATAL every CQ and QP of the Context
// (ErrDeviceFatal). So when WaitAsyncEvent returns either, its CQs and
// QPs already fail. It queues them for WaitAsyncEvent and TryAsyncEvent,
// up to 4096: beyond that the oldest are dropped.
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
	if err := s.init(c); err != nil {
		return AsyncEvent{}, c.asyncErr(op, err)
	}
	q := s.q.Load()
	for {
		if c.closed.Load() {
			return AsyncEvent{}, c.opErr(op, ErrClosed)
		}
		if err := ctx.Err(); err != nil {
			return AsyncEvent{}, c.opErr(op, err)
		}
		q.mu.Lock()
		if ev, ok := q.pop(); ok {
			q.mu.Unlock()
			return ev, nil
		}
		switch {
		case c.closed.Load(): // checked under mu, which Close's wakeWaits takes after setting it
			q.mu.Unlock()
			return AsyncEvent{}, c.opErr(op, ErrClosed)
		case q.fatalOut:
			q.mu.Unlock()
			return AsyncEvent{}, c.opErr(op, ErrDeviceFatal)
		case q.ended:
			err := q.err
			q.mu.Unlock()
			if err == nil {
				err = ErrDeviceFatal // it stopped at a DEVICE_FATAL another call took
			}
			return AsyncEvent{}, c.asyncErr(op, err)
		}
		if q.wake == nil {
			q.wake = make(chan struct{})
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
	}
}

// wakeWaits wakes the waits parked for an event, which then see the
// Context closed.
func (s *asyncEvents) wakeWaits() {
	if q := s.q.Load(); q != nil {
		q.mu.Lock()
		q.wakeAll()
		q.mu.Unlock()
	}
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
