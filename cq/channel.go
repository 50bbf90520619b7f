package cq

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/goverbs/goverbs/internal/fdturn"
)

// Channel is a completion channel (ibv_comp_channel): a file descriptor
// the kernel queues one event on each time an armed CQ attached to it gets
// a completion. Many CQs may share one Channel; each event names its CQ
// by a handle looked up in the channel's table, never by a pointer.
//
// Its methods that return an error return one wrapping os.ErrInvalid on
// a nil *Channel, as os.(*File) methods do on a nil *File.
//
// Create one with uverbs.Context.NewCompChannel. A Channel is safe for
// concurrent use. Wait and TryWait may be called from many goroutines;
// one at a time reads the fd.
//
// A Channel holds one file descriptor (FD), non-blocking and on the Go
// runtime's poller, where a Wait parks.
type Channel struct {
	dev    string
	f      *os.File
	fd     int
	readFn func(fd uintptr) bool // = ch.readWait, bound once: zero allocations per Wait

	mu    sync.RWMutex
	state atomic.Int32   // chOpen, chClosed, chGone: moved forward under mu; read with or without it
	table map[uint64]*CQ // guarded by mu: event handle -> CQ

	// rd waits on f. Its turn is held by whoever reads the fd: the
	// holder owns f's read deadline and the fields below. Close takes it
	// before it closes the fd, so the fd outlives every read.
	rd       fdturn.Reader
	ahead    sync.Mutex // held by a CQ's read-ahead (readAhead) for as long as it holds the turn
	pending  [64]uint64 // handles read from the fd, not yet delivered (a power of two: a ring)
	head, n  int
	rbuf     [8]byte // struct ib_uverbs_comp_event_desc
	lastH    uint64  // the handle deliver looked up last, and its CQ
	lastCQ   *CQ
	readErr  error
	lastRead int // events the last read pass took
}

// newChannel is cqseam.Hooks.NewChannel: it wraps fd, a completion channel the
// kernel created for device dev (uverbs.Context.NewCompChannel), and takes
// ownership of it.
func newChannel(fd int, dev string) (*Channel, error) {
	const op = "create comp channel"
	// os.NewFile puts a non-blocking fd on the runtime's poller, and
	// File.Fd (FD, for CQ creation) leaves it non-blocking only when it
	// came so: it is made non-blocking first.
	if err := setNonblock(fd); err != nil {
		closeFD(fd)
		return nil, &OpError{Op: op, Device: dev, Err: err}
	}
	ch := &Channel{dev: dev, fd: fd, f: os.NewFile(uintptr(fd), dev+"-comp-channel"),
		table: map[uint64]*CQ{}}
	if err := ch.rd.Init(ch.f); err != nil {
		ch.f.Close()
		return nil, &OpError{Op: op, Device: dev, Err: err}
	}
	ch.readFn = ch.readWait
	return ch, nil
}

// FD returns the channel's file descriptor, for CQ creation and for
// callers that poll it themselves. It stays owned by the Channel. It is
// -1 for a nil Channel, as os.(*File).Fd says for a nil File.
func (ch *Channel) FD() int {
	if ch == nil {
		return -1
	}
	return int(ch.f.Fd())
}

// attach registers a CQ that uses the channel under its event handle; it
// fails once the channel is closed.
func (ch *Channel) attach(h uint64, c *CQ) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.isClosed() {
		return ErrClosed
	}
	ch.table[h] = c
	return nil
}

// detach forgets a CQ: later events naming it are dropped.
func (ch *Channel) detach(h uint64) {
	ch.mu.Lock()
	delete(ch.table, h)
	ch.mu.Unlock()
}

func (ch *Channel) lookup(h uint64) *CQ {
	ch.mu.RLock()
	c := ch.table[h]
	ch.mu.RUnlock()
	return c
}

// Close destroys the channel (ibv_destroy_comp_channel): every Wait in
// progress ends with ErrClosed, as does every later call, and Close
// returns once none of them is reading the channel. A second Close
// returns ErrClosed.
//
// Unlike ibv_destroy_comp_channel, Close does not refuse while CQs use
// the channel: it closes the channel under them, so closing it is how a
// program wakes the goroutines parked on it. Those CQs keep working
// (polled, armed, closed as before); their completion events go nowhere.
func (ch *Channel) Close() error {
	if ch == nil {
		return nilErr("destroy comp channel")
	}
	const op = "destroy comp channel"
	ch.mu.Lock()
	if ch.isClosed() {
		ch.mu.Unlock()
		return &OpError{Op: op, Device: ch.dev, Err: ErrClosed}
	}
	ch.state.Store(chGone)
	ch.mu.Unlock()
	if err := ch.closeFDs(); err != nil {
		return &OpError{Op: op, Device: ch.dev, Err: err}
	}
	return nil
}

// closeFDs closes the fd once the state is chGone: it wakes a parked
// Wait and closes the fd only when no Wait or TryWait is reading it.
func (ch *Channel) closeFDs() error {
	ch.rd.Shut()                         // a parked Wait wakes, sees chGone and gives up its turn
	_ = ch.rd.Lock(context.Background()) // no Wait or TryWait is reading the fd now
	err := ch.f.Close()
	ch.rd.Unlock()
	return err
}

// shut closes the channel because its device context closed (which
// ended its CQs first): a parked Wait wakes with ErrClosed, and every
// later call returns ErrClosed. With fds false it only marks the channel
// closed, for a context that closes its kernel objects next (a Wait they
// wake then says ErrClosed, not what the fd says); a later shut closes
// the fds.
func (ch *Channel) shut(fds bool) {
	ch.mu.Lock()
	switch {
	case ch.state.Load() == chGone:
		ch.mu.Unlock()
		return
	case !fds:
		ch.state.Store(chClosed)
		ch.mu.Unlock()
		return
	}
	ch.state.Store(chGone)
	ch.mu.Unlock()
	_ = ch.closeFDs()
}

// A Channel's states, in the only order it goes through them. Close goes
// from chOpen to chGone at once; a context's Close marks its channels
// chClosed first and closes their fds after its kernel objects.
const (
	chOpen   int32 = iota
	chClosed       // every call but the fds' closing says ErrClosed; the fds are open
	chGone         // closeFDs has been called: the fds are closed or closing
)

func (ch *Channel) isClosed() bool { return ch.state.Load() != chOpen }

// Wait waits for the next completion event and returns the CQ it names
// (ibv_get_cq_event). Acknowledge each event with CQ.Ack, and re-arm the
// CQ with ReqNotify to get another. An event may come with the CQ already
// empty: a completion that arrived between the re-arm and the drain.
//
// The wait parks the goroutine on the Go runtime's poller, not an OS
// thread. A Wait that finds an event queued reads that one alone, as
// ibv_get_cq_event does: one read(2) an event. A Wait that had to park
// reads every queued event when it wakes, until EAGAIN. Events left in
// the fd are the next Wait's or TryWait's, which reads before it parks;
// none is stranded waiting for a readiness that already came. Wait ends
// with an error wrapping ctx.Err() (context.Canceled or
// context.DeadlineExceeded) when ctx is done, one wrapping ErrClosed
// when the channel is closed, and one wrapping EIO, at once, when the
// device was removed under it (the kernel closed the channel's queue).
func (ch *Channel) Wait(ctx context.Context) (*CQ, error) {
	if ch == nil {
		return nil, nilErr("get cq event")
	}
	const op = "get cq event"
	if err := ch.rd.Lock(ctx); err != nil {
		return nil, &OpError{Op: op, Device: ch.dev, Err: err}
	}
	defer ch.rd.Unlock()
	for {
		if ch.isClosed() { // by Close, or by its context's Close with events pending
			return nil, &OpError{Op: op, Device: ch.dev, Err: ErrClosed}
		}
		if c := ch.next(); c != nil {
			return c, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, &OpError{Op: op, Device: ch.dev, Err: err}
		}
		// One event read as it is, before the poller, whose wait costs
		// more (a context's AfterFunc among it).
		ch.readErr = nil
		ch.readEvents(1) // the turn keeps Close from closing the fd under it
		err := ch.readErr
		if err == nil && ch.lastRead == 0 {
			err = ch.park(ctx)
		}
		if err != nil {
			return nil, ch.waitErr(err)
		}
	}
}

// waitErr is the error of a Wait or TryWait whose read or park failed:
// ErrClosed if the channel was closed meanwhile (its context's Close may
// have made the fd fail first), else err.
//
//go:noinline
func (ch *Channel) waitErr(err error) error {
	if ch.isClosed() {
		err = ErrClosed
	}
	return &OpError{Op: "get cq event", Device: ch.dev, Err: err}
}

// park reads the fd, parking on the poller until at least one event came
// or ctx ends. The caller holds the turn.
func (ch *Channel) park(ctx context.Context) error {
	err := ch.rd.Wait(ctx, ch.readFn) // the callback reads before parking
	switch {
	case err == nil:
		return ch.readErr
	case ch.isClosed():
		return ErrClosed // the runtime's "use of closed file" is not ErrClosed
	case err == ctx.Err(): // the wait's context ended it
		return err
	}
	// The poller failed without reading. The fd itself may say why.
	ch.readEvents(len(ch.pending))
	switch {
	case ch.readErr != nil:
		return ch.readErr
	case ch.lastRead > 0:
		return nil
	}
	return fmt.Errorf("%v, with no event to read: %w", err, syscall.EIO)
}

// TryWait returns the CQ of the next completion event and true if one is
// queued, and false if none is. It never waits for an event (at most for
// a CQ's arm that is reading the channel ahead, on mlx5, which never
// blocks) and allocates nothing.
// Acknowledge the event with [CQ.Ack], as one from Wait.
func (ch *Channel) TryWait() (*CQ, bool, error) {
	if ch == nil {
		return nil, false, nilErr("get cq event")
	}
	const op = "get cq event"
	if !ch.rd.TryLock() && !ch.afterReadAhead() {
		return nil, false, nil // a Wait is reading: it will take what is queued
	}
	defer ch.rd.Unlock()
	for {
		if ch.isClosed() { // by Close, or by its context's Close with events pending
			return nil, false, &OpError{Op: op, Device: ch.dev, Err: ErrClosed}
		}
		if c := ch.next(); c != nil {
			return c, true, nil
		}
		ch.readErr = nil
		ch.readEvents(1) // the turn keeps Close from closing the fd under it
		if ch.readErr != nil {
			return nil, false, ch.waitErr(ch.readErr)
		}
		if ch.lastRead == 0 {
			return nil, false, nil
		}
	}
}

// afterReadAhead takes the turn once a CQ's read-ahead, which never
// blocks, has given it back, and reports whether it did: false when a
// Wait or TryWait holds it. Off TryWait's path.
//
//go:noinline
func (ch *Channel) afterReadAhead() bool {
	ch.ahead.Lock()
	ok := ch.rd.TryLock()
	ch.ahead.Unlock()
	return ok
}

// next delivers the oldest pending event whose CQ still exists, counting
// it as read for that CQ. The caller holds the turn.
func (ch *Channel) next() *CQ {
	for ch.n > 0 {
		h := ch.pending[ch.head]
		ch.head = (ch.head + 1) & (len(ch.pending) - 1)
		ch.n--
		if c := ch.deliver(h); c != nil {
			return c
		}
	}
	return nil
}

// deliver returns the CQ an event names, counting the event as read for
// it, or nil when the CQ was destroyed after the kernel queued the event
// (which is then dropped). The caller holds the turn.
//
// The CQ the last event named is kept, so that a run of events of one CQ
// (the common case) looks in the table (a read lock, a map) once.
// Handles are never reused, and
// eventRead refuses a closed CQ, so the kept one stays right after its CQ
// is closed and detached.
func (ch *Channel) deliver(h uint64) *CQ {
	c := ch.lastCQ
	if h != ch.lastH || c == nil {
		c = ch.lookup(h)
		ch.lastH, ch.lastCQ = h, c
	}
	if c != nil && c.eventRead() {
		return c
	}
	return nil
}

// readWait is park's callback: it reads every queued event (until
// EAGAIN, or the buffer is full), and says false, to park, when none came.
func (ch *Channel) readWait(uintptr) bool {
	ch.readEvents(len(ch.pending))
	return ch.lastRead > 0 || ch.readErr != nil
}

// The pending buffer is a ring indexed with a mask.
var _ [0]struct{} = [len(Channel{}.pending) & (len(Channel{}.pending) - 1)]struct{}{}
