package cq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Channel is a completion channel (ibv_comp_channel): a file descriptor
// the kernel queues one event on each time an armed CQ attached to it gets
// a completion. Many CQs may share one Channel; each event names its CQ
// by a handle looked up in the channel's table, never by a pointer.
//
// Create one with uverbs.Context.NewCompChannel. A Channel is safe for
// concurrent use. Wait and TryWait may be called from many goroutines;
// one at a time reads the fd.
type Channel struct {
	dev    string
	f      *os.File // non-blocking
	rc     syscall.RawConn
	readFn func(fd uintptr) bool // = ch.readWait, bound once: zero allocations per Wait
	tryFn  func(fd uintptr)      // = ch.readTry

	mu     sync.RWMutex
	users  int            // guarded by mu: CQs attached
	closed bool           // guarded by mu
	table  map[uint64]*CQ // guarded by mu: event handle -> CQ

	// turn is a one-token semaphore: its holder reads the fd, owns the
	// fd's read deadline and the fields below.
	turn     chan struct{}
	pending  [64]uint64 // handles read from the fd, not yet delivered
	head, n  int
	rbuf     [8]byte // struct ib_uverbs_comp_event_desc
	readErr  error
	lastRead int // events the last read pass took
	// kicked is set by a cancelled Wait's context, just before it moves
	// the fd's read deadline into the past: the next park clears the
	// deadline only then, not on every park.
	kicked atomic.Bool
}

// errNoEvent is what TryWait returns when no event is queued: built once,
// since polling for events is a hot path. ErrNoEvent is the same value.
var errNoEvent = &OpError{Op: "get cq event", Err: syscall.EAGAIN}

// ErrNoEvent is returned by TryWait when no event is queued; it wraps
// EAGAIN.
var ErrNoEvent error = errNoEvent

// aLongTimeAgo is a read deadline in the past: it wakes a parked Wait.
var aLongTimeAgo = time.Unix(1, 0)

// NewChannel wraps fd, a completion channel the kernel created for device
// dev, and takes ownership of it. uverbs.Context.NewCompChannel calls it;
// there is no reason to call it directly.
func NewChannel(fd int, dev string) (*Channel, error) {
	const op = "create comp channel"
	if err := setNonblock(fd, true); err != nil {
		closeFD(fd)
		return nil, &OpError{Op: op, Device: dev, Err: err}
	}
	ch := &Channel{dev: dev, f: os.NewFile(uintptr(fd), dev+"-comp-channel"),
		table: map[uint64]*CQ{}, turn: make(chan struct{}, 1)}
	rc, err := ch.f.SyscallConn()
	if err != nil {
		ch.f.Close()
		return nil, &OpError{Op: op, Device: dev, Err: err}
	}
	ch.rc = rc
	ch.readFn = ch.readWait
	ch.tryFn = ch.readTry
	return ch, nil
}

// FD returns the channel's file descriptor, for CQ creation and for
// callers that poll it themselves. It stays owned by the Channel.
func (ch *Channel) FD() int { return int(ch.f.Fd()) }

// attach registers a CQ that uses the channel under its event handle; it
// fails once the channel is closed.
func (ch *Channel) attach(h uint64, c *CQ) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return ErrClosed
	}
	ch.users++
	ch.table[h] = c
	return nil
}

// detach forgets a CQ: later events naming it are dropped.
func (ch *Channel) detach(h uint64) {
	ch.mu.Lock()
	ch.users--
	delete(ch.table, h)
	ch.mu.Unlock()
}

func (ch *Channel) lookup(h uint64) *CQ {
	ch.mu.RLock()
	c := ch.table[h]
	ch.mu.RUnlock()
	return c
}

// Close destroys the channel (ibv_destroy_comp_channel). It fails with an
// error wrapping EBUSY while a CQ still uses the channel, and with
// ErrClosed the second time. A Wait in progress ends with ErrClosed.
func (ch *Channel) Close() error {
	const op = "destroy comp channel"
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch {
	case ch.closed:
		return &OpError{Op: op, Device: ch.dev, Err: ErrClosed}
	case ch.users > 0:
		return &OpError{Op: op, Device: ch.dev, Err: &busyError{n: ch.users, what: "CQ", verb: "attached to the channel"}}
	}
	ch.closed = true
	if err := ch.f.Close(); err != nil {
		return &OpError{Op: op, Device: ch.dev, Err: err}
	}
	return nil
}

func (ch *Channel) isClosed() bool {
	ch.mu.RLock()
	defer ch.mu.RUnlock()
	return ch.closed
}

// Wait waits for the next completion event and returns the CQ it names
// (ibv_get_cq_event). Acknowledge each event with CQ.Ack, and re-arm the
// CQ with ReqNotify to get another. An event may come with the CQ already
// empty: a completion that arrived between the re-arm and the drain.
//
// The wait parks the goroutine on the Go runtime's poller, not an OS
// thread. Each wake-up reads every queued event, until EAGAIN. Wait ends
// with an error wrapping ctx.Err() (context.Canceled or
// context.DeadlineExceeded) when ctx is done, one wrapping ErrClosed
// when the channel is closed, and one wrapping EIO, at once, when the
// device was removed under it (the kernel closed the channel's queue).
func (ch *Channel) Wait(ctx context.Context) (*CQ, error) {
	const op = "get cq event"
	select {
	case ch.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, &OpError{Op: op, Device: ch.dev, Err: ctx.Err()}
	}
	defer func() { <-ch.turn }()
	for {
		if c := ch.next(); c != nil {
			return c, nil
		}
		if ch.isClosed() {
			return nil, &OpError{Op: op, Device: ch.dev, Err: ErrClosed}
		}
		if err := ctx.Err(); err != nil {
			return nil, &OpError{Op: op, Device: ch.dev, Err: err}
		}
		if err := ch.park(ctx); err != nil {
			return nil, &OpError{Op: op, Device: ch.dev, Err: err}
		}
	}
}

// park reads the fd, parking on the poller until at least one event came
// or ctx ends. The caller holds turn.
func (ch *Channel) park(ctx context.Context) error {
	if ch.kicked.Load() { // a cancelled Wait left the deadline in the past
		ch.kicked.Store(false)
		_ = ch.f.SetReadDeadline(time.Time{})
	}
	if ctx.Done() != nil { // context.Background allocates nothing here
		kicked := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			ch.kicked.Store(true)
			_ = ch.f.SetReadDeadline(aLongTimeAgo)
			close(kicked)
		})
		defer func() {
			if !stop() {
				<-kicked // let it finish before the next wait clears the deadline
			}
		}()
	}
	ch.readErr = nil
	err := ch.rc.Read(ch.readFn) // the callback reads before parking
	switch {
	case err == nil:
		return ch.readErr
	case ch.isClosed():
		return ErrClosed // the runtime's "use of closed file" is not ErrClosed
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
		return ctx.Err()
	}
	// The poller failed without reading: a channel whose device was
	// disassociated polls EPOLLERR alone (ib_uverbs_event_poll), which the
	// runtime reports to every later wait as "not pollable". The fd itself
	// says why: read(2) fails with EIO.
	ch.readErr, ch.lastRead = nil, 0
	if cerr := ch.rc.Control(ch.tryFn); cerr == nil {
		switch {
		case ch.readErr != nil:
			return ch.readErr
		case ch.lastRead > 0:
			return nil
		}
	}
	return fmt.Errorf("%v, with no event to read: %w", err, syscall.EIO)
}

// TryWait returns the CQ of the next completion event if one is queued,
// and ErrNoEvent (wrapping EAGAIN) if none is. It never blocks and
// allocates nothing.
func (ch *Channel) TryWait() (*CQ, error) {
	const op = "get cq event"
	select {
	case ch.turn <- struct{}{}:
	default:
		return nil, errNoEvent // a Wait is reading: it will take what is queued
	}
	defer func() { <-ch.turn }()
	for {
		if c := ch.next(); c != nil {
			return c, nil
		}
		ch.readErr, ch.lastRead = nil, 0
		if err := ch.rc.Control(ch.tryFn); err != nil {
			if ch.isClosed() {
				err = ErrClosed
			}
			return nil, &OpError{Op: op, Device: ch.dev, Err: err}
		}
		if ch.readErr != nil {
			return nil, &OpError{Op: op, Device: ch.dev, Err: ch.readErr}
		}
		if ch.lastRead == 0 {
			return nil, errNoEvent
		}
	}
}

// next delivers the oldest pending event whose CQ still exists, counting
// it as read for that CQ. The caller holds turn.
func (ch *Channel) next() *CQ {
	for ch.n > 0 {
		h := ch.pending[ch.head]
		ch.head = (ch.head + 1) % len(ch.pending)
		ch.n--
		if c := ch.lookup(h); c != nil && c.eventRead() {
			return c
		}
		// Its CQ was destroyed after the kernel queued the event: drop it.
	}
	return nil
}

// readWait is the Wait callback: read until EAGAIN (or the buffer is
// full); false, to park, when nothing came.
func (ch *Channel) readWait(fd uintptr) bool {
	ch.readAll(int(fd))
	return ch.lastRead > 0 || ch.readErr != nil
}

// readTry is the TryWait callback: read until EAGAIN, never park.
func (ch *Channel) readTry(fd uintptr) { ch.readAll(int(fd)) }
