package cq

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
)

// Backend is the kernel and provider side of one CQ, made by the device
// context: uverbs implements it, the user never sees it.
type Backend interface {
	// Handle is the kernel's handle of the CQ.
	Handle() uint32
	// Size is the number of CQEs the CQ holds, at least the size asked for.
	Size() int
	// Poll moves up to len(wcs) completions into wcs and returns how many,
	// or an error once the CQ is broken (an overrun lost completions).
	Poll(wcs []WC) (int, error)
	// ReqNotify arms the CQ for its next, or next solicited, completion.
	ReqNotify(solicitedOnly bool) error
	// EventRead is told of each completion event delivered for the CQ.
	EventRead()
	// Resize makes the CQ hold at least n entries, keeping what it holds.
	Resize(n int) (int, error)
	// Destroy destroys the CQ in the kernel and releases the provider's
	// ring, returning how many completion and async events the kernel
	// reported for it.
	Destroy() (compEvents, asyncEvents uint32, err error)
}

// Ring is a provider's completion ring, to which Poll hands over
// entirely when the Backend has one (RingBackend): one call into the
// provider per Poll, and no lock for an empty ring.
type Ring interface {
	// PollRing is Poll: it follows RingLock's protocol.
	PollRing(wcs []WC, l *RingLock) (int, error)
}

// RingLock is the CQ's side of a Ring's poll: the CQ's lock and its error
// word. A Ring's PollRing, in this order:
//
//  1. returns *l.Err() if it is not nil and the CQ is not Draining: the
//     CQ is closed or broken (a Ring whose look finds no ring once its CQ
//     is closed or broken, which Close and the backend that calls Fail
//     see to, may read the error word only then); while it is Draining,
//     goes on to step 3;
//  2. returns 0 if the ring is empty, reading it without the lock: the
//     ring may be given back (Close, Resize) at the same time, so the
//     provider keeps a ring it gave back readable, reading as empty,
//     until nothing can reach it;
//  3. takes l.Lock, returns *l.Err() (unlocking) if it is now set and
//     the CQ is not Draining, consumes up to len(wcs) completions, and,
//     while Draining, returns l.Drained(n) for the n it consumed; then
//     l.Unlock.
//
// In step 3 a Ring that can tell, under the lock, that Close has not run
// (its ring is still the one it looked at: Close releases it under the
// lock) may leave the error word unread: an overrun that Fail records
// between steps 1 and 3 then lets this one Poll out first, ordered before
// the Fail, as it would have been had it run a moment earlier. On a
// single-threaded CQ (Single) no other Poll, and no Close or Resize, runs
// beside it, so step 3 may consume what the look found without the lock
// or a second read.
//
// So two Polls never take the same completion, and a Poll never reads a
// ring that Close or Resize (which hold the lock) has unmapped.
type RingLock struct {
	mu  sync.Mutex
	err atomic.Pointer[error]
	// drain is err while err is an overrun (Fail) whose ring still holds
	// the completions that came before it: Poll hands them out before
	// err. Another value (nil once drained; err replaced by Close) means
	// no drain.
	drain atomic.Pointer[error]
	// single: the CQ was made WithSingleThreaded, and Lock and Unlock do
	// nothing (set by New before the Ring gets the RingLock).
	single bool
}

// Err returns the error every Poll returns from now on, or nil.
func (l *RingLock) Err() *error { return l.err.Load() }

// Lock takes the CQ's lock, unless the CQ is single-threaded.
func (l *RingLock) Lock() {
	if !l.single {
		l.mu.Lock()
	}
}

// Single reports whether the CQ is single-threaded: Lock and Unlock then
// do nothing, and a Ring may consume what its look found (step 3 above).
func (l *RingLock) Single() bool { return l.single }

// Unlock releases it.
func (l *RingLock) Unlock() {
	if !l.single {
		l.mu.Unlock()
	}
}

// Fail records the error that broke the CQ (an overrun). Poll first
// hands out what the ring still holds (the CQ is Draining), and returns
// the error from the first Poll that finds the ring empty on. The first
// error stays; Close's ErrClosed replaces it. It takes no lock: it may
// run with any lock held.
func (l *RingLock) Fail(err error) {
	p := &err
	// drain before err, so a look that finds err finds drain; where err
	// is already set (an earlier Fail, or Close), the two differ and no
	// drain begins.
	if l.drain.CompareAndSwap(nil, p) {
		l.err.CompareAndSwap(nil, p)
	}
}

// Draining reports whether Fail recorded an overrun whose ring is not yet
// drained: Poll still hands out what the ring holds. Only under the lock
// is the answer final.
func (l *RingLock) Draining() bool {
	d := l.drain.Load()
	return d != nil && d == l.err.Load()
}

// Drained is step 3's result while Draining, under the lock, for the n
// completions the Poll consumed: (n, nil) while there were any; once a
// Poll finds the ring empty, the drain ends and the error is returned,
// by that Poll and every later one.
func (l *RingLock) Drained(n int) (int, error) {
	if n > 0 {
		return n, nil
	}
	l.drain.Store(nil)
	return 0, *l.err.Load()
}

// RingBackend is a Backend with a Ring for Poll.
type RingBackend interface {
	Backend
	// Ring returns the provider's ring, or nil when it has none (Poll
	// then goes through Backend.Poll under the lock). The backend may
	// keep l, to Fail the CQ.
	Ring(l *RingLock) Ring
}

// backendRing polls through the Backend, under the lock: for a backend
// without a Ring.
type backendRing struct{ be Backend }

func (r *backendRing) PollRing(wcs []WC, l *RingLock) (int, error) {
	l.Lock()
	defer l.Unlock()
	if e := l.Err(); e != nil && !l.Draining() {
		return 0, *e
	}
	n, err := r.be.Poll(wcs)
	if err == nil && l.Draining() {
		return l.Drained(n)
	}
	return n, err
}

// Request is what a Backend is created from.
type Request struct {
	Size       int
	ChannelFD  int // -1 for none
	Vector     int
	UserHandle uint64 // the key events carry back
}

// Config holds the options of a new CQ.
type Config struct {
	Channel        *Channel
	Vector         int
	UserValue      uint64
	SingleThreaded bool
}

// Option sets an option of a new CQ.
type Option func(*Config)

// WithChannel attaches the CQ to a completion channel, which then receives
// its events once it is armed.
func WithChannel(ch *Channel) Option { return func(c *Config) { c.Channel = ch } }

// WithVector picks the completion vector (the interrupt the device raises
// events on), in [0, uverbs.Context.NumCompVectors).
func WithVector(v int) Option { return func(c *Config) { c.Vector = v } }

// WithSingleThreaded promises that the CQ is used by one goroutine at a
// time: no Poll runs at the same time as another Poll, ReqNotify, Resize
// or Close of the CQ, nor as a QP that completes into it being moved to
// RESET (mlx5 then takes the QP's completions out of the CQ). Poll then
// takes no lock to consume (IBV_CREATE_CQ_ATTR_SINGLE_THREADED of
// ibv_create_cq_ex): two locked instructions fewer per Poll that finds
// completions (the lock's taking and giving back). Waiting on the CQ's channel and Ack may still happen on
// other goroutines. Breaking the promise is a data race, with what that
// means in Go: a completion handed to two Polls or to none, and a Close
// racing a Poll may crash the process, as a map written by two
// goroutines does. Without the option, every method is safe to race.
func WithSingleThreaded() Option { return func(c *Config) { c.SingleThreaded = true } }

// WithUserValue stores a value of the caller's with the CQ (the cq_context
// of ibv_create_cq); UserValue returns it, also from the CQ an event names.
func WithUserValue(v uint64) Option { return func(c *Config) { c.UserValue = v } }

// CQ is a completion queue (ibv_cq).
//
// All its methods are safe for concurrent use, unless it was made
// WithSingleThreaded. A Poll that finds the CQ empty takes no lock (both
// providers, rxe and mlx5, allow it); a Poll that consumes, ReqNotify,
// Resize and Close serialise on one lock, so two Polls never take the
// same completion, and a Close racing a Poll never unmaps the ring under
// it: the racing Poll returns 0 or ErrClosed (see RingLock). A
// single-threaded CQ's Poll consumes without the lock, on the caller's
// promise that nothing races it. Calls after Close return an error
// wrapping ErrClosed. Ack is a single atomic compare-and-swap.
type CQ struct {
	be   Backend
	cfg  Config
	dev  string
	user uint64 // the event handle

	// ring is be's provider ring (RingBackend), or be itself through
	// backendRing: set by New, never changed.
	ring Ring

	delivered atomic.Uint64 // completion events Wait/TryWait returned for this CQ
	acked     atomic.Uint64 // … and Ack acknowledged

	lock   RingLock    // lock.mu serialises the backend's calls (Ack excepted); lock.err is Poll's
	closed atomic.Bool // set under lock.mu; read anywhere
}

// handles hands out the user handles that CQ events carry: a counter, so
// an event names its CQ by a key into a table, never by a pointer, and
// never by a key that a destroyed CQ used.
var handles atomic.Uint64

// New creates a CQ of at least size entries through create, which makes
// the kernel object (uverbs.Context.NewCQ passes its own). dev names the
// device in errors.
func New(dev string, size int, create func(Request) (Backend, error), opts ...Option) (*CQ, error) {
	const op = "create cq"
	var cfg Config
	for _, o := range opts {
		o(&cfg)
	}
	if size < 1 {
		return nil, &OpError{Op: op, Device: dev, Err: fmt.Errorf("size %d, want at least 1: %w", size, syscall.EINVAL)}
	}
	if cfg.Vector < 0 {
		return nil, &OpError{Op: op, Device: dev, Err: fmt.Errorf("completion vector %d: %w", cfg.Vector, syscall.EINVAL)}
	}
	c := &CQ{cfg: cfg, dev: dev, user: handles.Add(1)}
	c.lock.single = cfg.SingleThreaded
	req := Request{Size: size, ChannelFD: -1, Vector: cfg.Vector, UserHandle: c.user}
	if ch := cfg.Channel; ch != nil {
		if err := ch.attach(c.user, c); err != nil {
			return nil, &OpError{Op: op, Device: dev, Err: fmt.Errorf("comp channel: %w", err)}
		}
		req.ChannelFD = ch.FD()
	}
	be, err := create(req)
	if err != nil {
		if cfg.Channel != nil {
			cfg.Channel.detach(c.user)
		}
		return nil, err
	}
	c.be = be
	if rb, ok := be.(RingBackend); ok {
		c.ring = rb.Ring(&c.lock)
	}
	if c.ring == nil {
		c.ring = &backendRing{be}
	}
	return c, nil
}

// Size returns how many completions the CQ holds: at least the size asked
// for (ibv_cq.cqe).
func (c *CQ) Size() int { return c.be.Size() }

// UserValue returns the value given by WithUserValue.
func (c *CQ) UserValue() uint64 { return c.cfg.UserValue }

// Channel returns the completion channel the CQ is attached to, or nil.
func (c *CQ) Channel() *Channel { return c.cfg.Channel }

// Vector returns the CQ's completion vector.
func (c *CQ) Vector() int { return c.cfg.Vector }

// EventHandle returns the handle that the CQ's completion events and
// async events (uverbs.AsyncEvent.CQHandle) carry.
func (c *CQ) EventHandle() uint64 { return c.user }

// Backend returns what created the CQ (uverbs' side of it), for uverbs.
func (c *CQ) Backend() Backend { return c.be }

// Handle returns the kernel's handle of the CQ, for QP creation.
func (c *CQ) Handle() uint32 { return c.be.Handle() }

// errPollClosed is what Poll returns after Close; Close stores it in the
// RingLock's error word.
var errPollClosed error = &OpError{Op: "poll cq", Err: ErrClosed}

// Poll moves up to len(wcs) completions from the CQ into wcs, oldest
// first, and returns how many (ibv_poll_cq). It returns 0 when the CQ is
// empty, never more than len(wcs), and never consumes a completion it has
// no room for: what it leaves stays for the next Poll. A polled
// completion is gone from the CQ for good. Poll makes no system call and
// allocates nothing; on an empty CQ it takes no lock either. It is
// one call into the provider, small enough to be inlined into the caller.
func (c *CQ) Poll(wcs []WC) (int, error) {
	return c.ring.PollRing(wcs, &c.lock)
}

// Resize makes the CQ hold at least n completions (ibv_resize_cq),
// keeping the ones it holds, in order. It fails with EINVAL when n is
// below what the CQ holds now or above the device's maximum.
func (c *CQ) Resize(n int) error {
	const op = "resize cq"
	c.lock.mu.Lock()
	defer c.lock.mu.Unlock()
	if c.closed.Load() {
		return &OpError{Op: op, Device: c.dev, Err: ErrClosed}
	}
	if n < 1 {
		return &OpError{Op: op, Device: c.dev, Err: fmt.Errorf("size %d, want at least 1: %w", n, syscall.EINVAL)}
	}
	if _, err := c.be.Resize(n); err != nil {
		return &OpError{Op: op, Device: c.dev, Err: fmt.Errorf("to %d entries: %w", n, err)}
	}
	return nil
}

// ReqNotify arms the CQ (ibv_req_notify_cq): the next completion added to
// it raises one event on its channel; with solicitedOnly, only the next
// solicited or unsuccessful completion does. Arming is one-shot: after
// one event, nothing more comes until the next ReqNotify, and there is
// neither an "after N completions" mode nor an automatic re-arm. Arming
// again before the event is harmless, and a plain arm overrides a
// solicited one. A completion already in the CQ when it is armed raises
// no event, so poll after arming: arm, poll until empty, then wait (as
// [Channel.Serve] does).
func (c *CQ) ReqNotify(solicitedOnly bool) error {
	// The lock is released by hand on each path, not deferred: a
	// deferred call costs every arm a closure's setup and an indirect
	// call, on the path that runs once per event.
	c.lock.mu.Lock()
	if c.closed.Load() {
		c.lock.mu.Unlock()
		return &OpError{Op: "req notify cq", Device: c.dev, Err: ErrClosed}
	}
	err := c.be.ReqNotify(solicitedOnly)
	c.lock.mu.Unlock()
	if err != nil {
		return &OpError{Op: "req notify cq", Device: c.dev, Err: err}
	}
	return nil
}

// eventRead counts an event the channel delivers; false if the CQ is closed.
func (c *CQ) eventRead() bool {
	c.lock.mu.Lock() // released by hand, as in ReqNotify
	if c.closed.Load() {
		c.lock.mu.Unlock()
		return false
	}
	c.delivered.Add(1)
	c.be.EventRead()
	c.lock.mu.Unlock()
	return true
}

// Ack acknowledges n completion events of the CQ that Wait or TryWait
// returned (ibv_ack_cq_events). It is one lock-free compare-and-swap, so
// acknowledge in batches or one by one as suits; Close refuses to destroy
// a CQ while events it delivered are unacknowledged. Acknowledging more
// events than were delivered and not yet acknowledged, or a negative
// number, is an error wrapping EINVAL and acknowledges nothing: no credit
// is banked against later events. After Close it returns ErrClosed.
func (c *CQ) Ack(n int) error {
	for {
		a, d := c.acked.Load(), c.delivered.Load()
		if n < 0 || uint64(n) > d-a {
			return c.ackErr(n, d-a)
		}
		if n == 0 || c.acked.CompareAndSwap(a, a+uint64(n)) {
			if c.closed.Load() {
				return c.ackErr(n, d-a)
			}
			return nil
		}
	}
}

// ackErr is Ack's error, off its path.
//
//go:noinline
func (c *CQ) ackErr(n int, unacked uint64) error {
	const op = "ack cq events"
	if c.closed.Load() {
		return &OpError{Op: op, Device: c.dev, Err: ErrClosed}
	}
	return &OpError{Op: op, Device: c.dev, Err: fmt.Errorf("%d events, with %d delivered and not acknowledged: %w", n, unacked, syscall.EINVAL)}
}

// Unacked returns how many delivered completion events are not yet acknowledged.
func (c *CQ) Unacked() int {
	d, a := c.delivered.Load(), c.acked.Load()
	if a >= d {
		return 0
	}
	return int(d - a)
}

// Close destroys the CQ (ibv_destroy_cq).
//
// Where ibv_destroy_cq blocks until every event it reported is
// acknowledged, possibly forever, Close never blocks: while events that
// Wait or TryWait delivered for the CQ are unacknowledged, it leaves the
// CQ alone and returns an error that wraps EBUSY and says how many are
// unacknowledged; Ack them and Close again. Events read but not yet
// delivered are dropped. Close also fails with EBUSY while a QP uses the
// CQ, and with ErrClosed the second time.
func (c *CQ) Close() error {
	const op = "destroy cq"
	c.lock.mu.Lock()
	defer c.lock.mu.Unlock()
	if c.closed.Load() {
		return &OpError{Op: op, Device: c.dev, Err: ErrClosed}
	}
	if n := c.Unacked(); n > 0 {
		return &OpError{Op: op, Device: c.dev, Err: &busyError{n: n, what: "completion event", verb: "not acknowledged (CQ.Ack)"}}
	}
	if _, _, err := c.be.Destroy(); err != nil {
		if !errors.Is(err, ErrClosed) {
			return err // EBUSY (a QP uses it) and the like: the CQ lives on
		}
		// The device context is closed: the kernel destroyed the CQ with it
		// and the backend released the ring, so the CQ is gone all the same.
		c.closed.Store(true)
		c.lock.err.Store(&errPollClosed)
		if c.cfg.Channel != nil {
			c.cfg.Channel.detach(c.user)
		}
		return err
	}
	c.closed.Store(true)
	c.lock.err.Store(&errPollClosed)
	if c.cfg.Channel != nil {
		c.cfg.Channel.detach(c.user)
	}
	return nil
}

// shut ends the CQ when its device context closed, which destroyed it in
// the kernel: release gives the provider's ring back, under the lock and
// before the error word says ErrClosed (RingLock's protocol, as in Close),
// and every later call returns ErrClosed.
func (c *CQ) shut(release func()) {
	c.lock.mu.Lock()
	defer c.lock.mu.Unlock()
	if c.closed.Load() {
		return
	}
	if release != nil {
		release()
	}
	c.closed.Store(true)
	c.lock.err.Store(&errPollClosed)
	if c.cfg.Channel != nil {
		c.cfg.Channel.detach(c.user)
	}
}

// busyError says how many things keep an object busy; it wraps EBUSY.
type busyError struct {
	n          int
	what, verb string
}

func (e *busyError) Error() string {
	s := strconv.Itoa(e.n) + " " + e.what
	if e.n != 1 {
		s += "s"
	}
	return s + " " + e.verb + ": " + syscall.EBUSY.Error()
}

func (e *busyError) Unwrap() error { return syscall.EBUSY }
