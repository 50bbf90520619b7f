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
// A Channel holds the channel's file descriptor (FD) and, from the first
// Wait that finds nothing queued, an epoll instance through which such a
// Wait parks on the Go runtime's poller. The channel's fd is in that
// instance only while Waits keep parking, so events that come while the
// caller is busy elsewhere wake no thread. A channel only polled, or
// waited on with TryWait, never makes the instance: one descriptor, not
// two, for each of a server's idle connections.
type Channel struct {
	dev string
	// f is the channel's fd, non-blocking, and not on the runtime's
	// poller: goverbs reads it with raw system calls. Were it on the
	// poller, the kernel would wake the runtime's poller thread for every
	// event it queues while no Wait is parked (any Go program with a
	// timer pending has a thread in epoll_wait), costing a thread wakeup
	// and a cross-CPU interrupt per event that a Wait then takes at once.
	f  *os.File
	fd int
	// ep is an epoll instance of the channel's own, on the runtime's
	// poller, made by the first Wait that has to park (nil before; set
	// under mu and the turn, so that Close, under mu, sees it or the Wait
	// sees the channel closed). It watches fd (watched) from a Wait that
	// has to park until a Wait or TryWait finds an event without parking:
	// while Waits park, the watch stays and costs nothing per Wait; while
	// events come before the Waits, the runtime does not hear of them.
	ep        *os.File
	readFn    func(epfd uintptr) bool // = ch.readWait, bound once: zero allocations per Wait
	unwatchFn func(epfd uintptr)      // = ch.unwatch

	mu    sync.RWMutex
	state atomic.Int32   // chOpen, chClosed, chGone: moved forward under mu; read with or without it
	table map[uint64]*CQ // guarded by mu: event handle -> CQ

	// rd waits on ep. Its turn is held by whoever reads the fd: the
	// holder owns ep's read deadline and the fields below. Close takes it
	// before it closes the fd, so the fd outlives every read.
	rd       fdturn.Reader
	ahead    sync.Mutex // held by a CQ's read-ahead (readAhead) for as long as it holds the turn
	pending  [64]uint64 // handles read from the fd, not yet delivered (a power of two: a ring)
	head, n  int
	rbuf     [8]byte // struct ib_uverbs_comp_event_desc
	lastH    uint64  // the handle deliver looked up last, and its CQ
	lastCQ   *CQ
	readErr  error
	lastRead int  // events the last read pass took
	watched  bool // fd is in ep
	parked   bool // this park's callback found nothing and parked
}

// newChannel is cqseam.Hooks.NewChannel: it wraps fd, a completion channel the
// kernel created for device dev (uverbs.Context.NewCompChannel), and takes
// ownership of it.
func newChannel(fd int, dev string) (*Channel, error) {
	const op = "create comp channel"
	// os.NewFile puts a non-blocking fd on the runtime's poller; a
	// blocking one it leaves alone. The kernel makes the channel's fd
	// blocking, so it goes in as it came and is made non-blocking after,
	// with one F_SETFL: O_NONBLOCK is the only status flag it then has.
	ch := &Channel{dev: dev, fd: fd, f: os.NewFile(uintptr(fd), dev+"-comp-channel"),
		table: map[uint64]*CQ{}}
	if err := setNonblockFresh(fd); err != nil {
		ch.f.Close()
		return nil, &OpError{Op: op, Device: dev, Err: err}
	}
	ch.rd.InitTurn() // the epoll instance comes with the first park (makeEpoll)
	ch.readFn = ch.readWait
	ch.unwatchFn = ch.unwatch
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

// closeFDs closes both fds once the state is chGone: it wakes a parked
// Wait and closes the channel's fd only when no Wait or TryWait is
// reading it.
func (ch *Channel) closeFDs() error {
	var err error
	ch.mu.Lock()
	ep := ch.ep // the state is chGone: no Wait makes one after this
	ch.mu.Unlock()
	if ep != nil {
		err = ep.Close() // wakes a parked Wait, which then gives up its turn
	}
	_ = ch.rd.Lock(context.Background()) // no Wait or TryWait is reading the fd now
	if ferr := ch.f.Close(); err == nil {
		err = ferr
	}
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
		if !ch.watched {
			// The last Wait found its event queued (a park leaves the fd
			// watched): read one before going to the poller, whose
			// descriptor locks and reset are the dearer way to find it,
			// and deliver it without the pending buffer (empty here). On
			// a switch to parking that is one read(2) more, once.
			ch.readErr = nil
			h, ok := ch.readOne() // the turn keeps Close from closing the fd under it
			if ok {
				if c := ch.deliver(h); c != nil {
					return c, nil
				}
				continue // its CQ is gone: dropped, as next drops it
			}
			if ch.readErr != nil {
				return nil, ch.waitErr(ch.readErr)
			}
		}
		if err := ch.park(ctx); err != nil {
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
//
// It reads first; only when nothing is queued does it put the fd into ep
// (level-triggered: an event queued in between makes ep ready at once)
// and park on ep. It leaves the watch in place for the next Wait after a
// park that an event ended, and takes it away when the read found an
// event without parking, or when the wait ended otherwise.
func (ch *Channel) park(ctx context.Context) error {
	if !ch.rd.Attached() {
		if err := ch.makeEpoll(); err != nil {
			return err
		}
	}
	ch.readErr = nil
	err := ch.rd.Wait(ctx, ch.readFn) // the callback reads before parking
	if ch.watched && (err != nil || !ch.parked) {
		ch.unwatchNow()
	}
	ch.parked = false
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

// makeEpoll makes the channel's epoll instance, for the first park. The
// caller holds the turn.
//
//go:noinline
func (ch *Channel) makeEpoll() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.state.Load() == chGone {
		return ErrClosed
	}
	epfd, err := newEpoll()
	if err != nil {
		return err
	}
	if err := setNonblockFresh(epfd); err != nil {
		closeFD(epfd)
		return err
	}
	ep := os.NewFile(uintptr(epfd), ch.dev+"-comp-channel-epoll")
	if err := ch.rd.Attach(ep); err != nil {
		ep.Close()
		return err
	}
	ch.ep = ep
	return nil
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
		if ch.watched {
			ch.unwatchNow() // a caller that does not park: its events need not wake the poller
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

// readWait is the Wait callback, with ep's fd: read one event before
// parking, or every queued one (until EAGAIN, or the buffer is full) on a
// wake-up from a park; when nothing came, watch the fd through ep and say
// false, to park.
func (ch *Channel) readWait(epfd uintptr) bool {
	if ch.parked {
		ch.readEvents(len(ch.pending))
	} else {
		ch.readEvents(1)
	}
	if ch.lastRead > 0 || ch.readErr != nil {
		return true
	}
	if !ch.watched {
		if err := epollWatch(int(epfd), ch.fd, true); err != nil {
			ch.readErr = err
			return true
		}
		ch.watched = true
	}
	ch.parked = true
	return false
}

// unwatchNow takes the fd out of ep (if ep is closed, the watch went
// with it). The caller holds the turn.
func (ch *Channel) unwatchNow() {
	_ = ch.rd.Control(ch.unwatchFn)
	ch.watched = false
}

// unwatch takes the fd out of ep, whose fd it is given.
func (ch *Channel) unwatch(epfd uintptr) { _ = epollWatch(int(epfd), ch.fd, false) }

// The pending buffer is a ring indexed with a mask.
var _ [0]struct{} = [len(Channel{}.pending) & (len(Channel{}.pending) - 1)]struct{}{}
