package cq

import (
	"errors"
	"fmt"
	"github.com/goverbs/goverbs/internal/cqseam"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
)

// Config describes a new CQ, for uverbs.Context.NewCQ (ibv_create_cq's
// arguments). Only Size is required.
type Config struct {
	// Size is the least number of completions the CQ holds (cqe). The
	// device may make it larger: CQ.Size says how large.
	Size int
	// Channel, if not nil, is the completion channel the CQ's events go
	// to once it is armed (ReqNotify).
	Channel *Channel
	// Vector is the completion vector (the interrupt the device raises
	// events on), in [0, uverbs.Context.NumCompVectors).
	Vector int
	// UserValue is a value of the caller's kept with the CQ (cq_context);
	// UserValue returns it, also from the CQ an event names.
	UserValue uint64
	// Timestamps asks for each completion's time in WC.Timestamp, read
	// from the clock it names (ibv_create_cq_ex's wc_flags
	// IBV_WC_EX_WITH_COMPLETION_TIMESTAMP or _WALLCLOCK). The zero value,
	// NoTimestamps, asks for none. A device without the clock asked for
	// refuses the CQ with an error wrapping ErrNotSupported: rxe has no
	// completion timestamps at all.
	Timestamps Clock
}

// Clock names the clock a CQ's completion timestamps come from
// (Config.Timestamps).
type Clock uint8

const (
	// NoTimestamps: completions carry no time; WC.Timestamp is 0.
	NoTimestamps Clock = iota
	// DeviceClock: the device's free-running clock, in its own ticks
	// (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP): uverbs.DeviceAttr gives
	// their rate (HCACoreClock, in kHz) and the bits that count
	// (CompletionTimestampMask). Ticks compare and subtract; they are
	// no time of day.
	DeviceClock
	// WallClock: nanoseconds since the Unix epoch
	// (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK), from a device
	// that runs its clock in real time (mlx5, where its driver reports
	// that mode). goverbs does not convert device ticks to wall time, so
	// a device whose clock is free-running refuses it.
	WallClock
)

// The values are cqseam's, which the providers read.
var _ = [1]struct{}{}[WallClock-Clock(cqseam.WallClock)+DeviceClock-Clock(cqseam.DeviceClock)]

func (c Clock) String() string { return cqseam.Clock(c).String() }

// CQ is a completion queue (ibv_cq).
//
// All its methods are safe for concurrent use. A Poll that finds the CQ empty takes no lock (both
// providers, rxe and mlx5, allow it); a Poll that consumes, ReqNotify,
// Resize and Close serialise on one lock, so two Polls never take the
// same completion, and a Close racing a Poll never unmaps the ring under
// it: the racing Poll returns 0 or ErrClosed (see cqseam.RingLock).
// Calls after Close return an error
// wrapping ErrClosed. Ack is a single atomic compare-and-swap.
//
// On a nil *CQ, Ack, ReqNotify, Resize and Close return an error wrapping
// os.ErrInvalid (as os.(*File) methods do on a nil *File) and Unacked
// returns 0; Poll, the hot path, checks nothing and panics, as indexing a
// nil slice does.
type CQ struct {
	be   backend
	cfg  Config
	dev  string
	user uint64 // the event handle

	// ring is be's provider ring: set by newCQ, never changed.
	ring cqseam.Ring[WC]
	// arm is what ReqNotify and event delivery call: be, or a readFirst
	// around it where be's device needs a CQ's events read before it is
	// armed again (ArmNeedsEventsRead). Set by newCQ, never changed.
	arm armer

	delivered atomic.Uint64 // completion events Wait/TryWait returned for this CQ
	acked     atomic.Uint64 // … and Ack acknowledged

	lock   cqseam.RingLock // its Mutex serialises the backend's calls (Ack excepted); lock.err is Poll's
	closed atomic.Bool     // set under the lock; read anywhere
}

// handles hands out the user handles that CQ events carry: a counter, so
// an event names its CQ by a key into a table, never by a pointer, and
// never by a key that a destroyed CQ used.
var handles atomic.Uint64

// newCQ is cqseam.Hooks.NewCQ.
func newCQ(dev string, cfg Config, create func(cqseam.Request) (backend, error)) (*CQ, error) {
	const op = "create cq"
	if cfg.Size < 1 {
		return nil, &OpError{Op: op, Device: dev, Err: fmt.Errorf("size %d, want at least 1: %w", cfg.Size, syscall.EINVAL)}
	}
	if cfg.Vector < 0 {
		return nil, &OpError{Op: op, Device: dev, Err: fmt.Errorf("completion vector %d: %w", cfg.Vector, syscall.EINVAL)}
	}
	if cfg.Timestamps > WallClock {
		return nil, &OpError{Op: op, Device: dev, Err: fmt.Errorf("timestamps: %v: %w", cfg.Timestamps, syscall.EINVAL)}
	}
	c := &CQ{cfg: cfg, dev: dev, user: handles.Add(1)}
	req := cqseam.Request{Size: cfg.Size, ChannelFD: -1, Vector: cfg.Vector, UserHandle: c.user,
		Timestamps: cqseam.Clock(cfg.Timestamps)}
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
	c.arm = be
	if be.ArmNeedsEventsRead() && cfg.Channel != nil {
		c.arm = &readFirst{be: be, c: c}
	}
	c.ring = be.Ring(&c.lock)
	return c, nil
}

// Size returns how many completions the CQ holds: at least the size asked
// for (ibv_cq.cqe).
func (c *CQ) Size() int { return c.be.Size() }

// UserValue returns the configuration's UserValue.
func (c *CQ) UserValue() uint64 { return c.cfg.UserValue }

// Channel returns the completion channel the CQ is attached to, or nil.
func (c *CQ) Channel() *Channel { return c.cfg.Channel }

// Vector returns the CQ's completion vector.
func (c *CQ) Vector() int { return c.cfg.Vector }

// EventHandle returns the handle that the CQ's completion events and
// async events (uverbs.AsyncEvent.CQHandle) carry.
func (c *CQ) EventHandle() uint64 { return c.user }

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
	if c == nil {
		return nilErr("resize cq")
	}
	const op = "resize cq"
	c.lock.Lock()
	defer c.lock.Unlock()
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

// Notify says which completion raises the event of an armed CQ
// (ReqNotify).
type Notify uint8

const (
	// NextCompletion: the next completion, whatever it is.
	NextCompletion Notify = iota
	// NextSolicited: the next solicited completion (a receive whose send
	// carried the solicited flag) or unsuccessful one
	// (ibv_req_notify_cq's solicited_only).
	NextSolicited
)

// ReqNotify arms the CQ (ibv_req_notify_cq): the next completion added to
// it that n names raises one event on its channel. Arming is one-shot:
// after one event, nothing more comes until the next ReqNotify, and there
// is neither an "after N completions" mode nor an automatic re-arm.
// Arming again before the event is harmless, and NextCompletion overrides
// an earlier NextSolicited; an arm made after the event was queued counts,
// read or not (on mlx5, whose device would ignore it, ReqNotify first
// reads the channel's queued events, which Wait and TryWait then deliver:
// docs/CQ.md gives the limits). A completion already in the CQ when it is
// armed raises no event, so poll after arming: arm, poll until empty,
// then wait (as [Channel.Serve] does). Another value of n is an error
// wrapping EINVAL.
func (c *CQ) ReqNotify(n Notify) error {
	if c == nil {
		return nilErr("req notify cq")
	}
	// The lock is released by hand on each path, not deferred: a
	// deferred call costs every arm a closure's setup and an indirect
	// call, on the path that runs once per event.
	if n > NextSolicited {
		return c.notifyErr(n)
	}
	c.lock.Lock()
	if c.closed.Load() {
		c.lock.Unlock()
		return &OpError{Op: "req notify cq", Device: c.dev, Err: ErrClosed}
	}
	err := c.arm.ReqNotify(n == NextSolicited)
	c.lock.Unlock()
	if err != nil {
		return &OpError{Op: "req notify cq", Device: c.dev, Err: err}
	}
	return nil
}

// notifyErr is ReqNotify's error for a bad n, off its path.
//
//go:noinline
func (c *CQ) notifyErr(n Notify) error {
	return &OpError{Op: "req notify cq", Device: c.dev, Err: fmt.Errorf("notify %d: %w", n, syscall.EINVAL)}
}

// eventRead counts an event the channel delivers; false if the CQ is closed.
func (c *CQ) eventRead() bool {
	c.lock.Lock() // released by hand, as in ReqNotify
	if c.closed.Load() {
		c.lock.Unlock()
		return false
	}
	c.delivered.Add(1)
	c.arm.EventRead()
	c.lock.Unlock()
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
	if c == nil {
		return nilErr("ack cq events")
	}
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
	if c == nil {
		return 0
	}
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
	if c == nil {
		return nilErr(op)
	}
	c.lock.Lock()
	defer c.lock.Unlock()
	if c.closed.Load() {
		return &OpError{Op: op, Device: c.dev, Err: ErrClosed}
	}
	if n := c.Unacked(); n > 0 {
		return &OpError{Op: op, Device: c.dev, Err: &busyError{n: n, what: "completion event", verb: "not acknowledged (CQ.Ack)"}}
	}
	_, _, err := c.be.Destroy()
	if err != nil && !errors.Is(err, ErrClosed) {
		return err // EBUSY (a QP uses it) and the like: the CQ lives on
	}
	// With ErrClosed the device context is closed: the kernel destroyed
	// the CQ with it and the backend released the ring, so the CQ is gone
	// all the same.
	c.endLocked()
	return err
}

// shut ends the CQ when its device context closed, which destroyed it in
// the kernel: release gives the provider's ring back, under the lock and
// before the error word says ErrClosed (RingLock's protocol, as in Close),
// and every later call returns ErrClosed.
func (c *CQ) shut(release func()) {
	c.lock.Lock()
	defer c.lock.Unlock()
	if c.closed.Load() {
		return
	}
	if release != nil {
		release()
	}
	c.endLocked()
}

// endLocked marks the CQ closed once its kernel object and ring are gone:
// Poll finds ErrClosed in the error word, and its channel forgets it.
// The caller holds the lock.
func (c *CQ) endLocked() {
	c.closed.Store(true)
	c.lock.Close(&errPollClosed)
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

// nilErr is the error of a method called on a nil *CQ or *Channel, as
// os.(*File) methods on a nil *File return os.ErrInvalid.
//
//go:noinline
func nilErr(op string) error { return &OpError{Op: op, Err: os.ErrInvalid} }
