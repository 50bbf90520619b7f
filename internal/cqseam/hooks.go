package cqseam

import "strconv"

// Request is what a CQ's kernel object is made from.
type Request struct {
	Size       int
	ChannelFD  int // -1 for none
	Vector     int
	UserHandle uint64 // the key events carry back
	Timestamps Clock  // which clock the completions' timestamps come from
}

// Clock is cq.Clock, which cqseam cannot name: which clock, if any, a
// CQ's completion timestamps (cq.WC.Timestamp) are read from. cq's
// values are these, in this order.
type Clock uint8

const (
	NoTimestamps Clock = iota // none: WC.Timestamp stays 0
	DeviceClock               // the device's free-running clock, in its ticks
	WallClock                 // nanoseconds since the Unix epoch, by the device's real-time clock
)

var clockText = [...]string{"no timestamps", "device clock", "wall clock"}

func (c Clock) String() string {
	if int(c) < len(clockText) {
		return clockText[c]
	}
	return "unknown clock (" + strconv.Itoa(int(c)) + ")"
}

// Ring is a provider's completion ring, which serves every Poll of its
// CQ: one call into the provider, no lock for an empty ring. PollRing
// follows RingLock's protocol. WC is cq.WC.
type Ring[WC any] interface {
	PollRing(wcs []WC, l *RingLock) (int, error)
}

// Backend is the kernel and provider side of one CQ, made by the device
// context (uverbs). ReqNotify, EventRead, Resize and Destroy run under
// the CQ's lock. WC is cq.WC.
type Backend[WC any] interface {
	Handle() uint32
	Size() int
	// Ring returns the provider's ring. The backend may keep l, to Fail
	// the CQ.
	Ring(l *RingLock) Ring[WC]
	// ReqNotify arms the CQ for its next, or next solicited, completion.
	ReqNotify(solicitedOnly bool) error
	// EventRead is told of each completion event delivered for the CQ.
	EventRead()
	// ArmNeedsEventsRead reports whether the device ignores an arm made
	// after it raised an event for the CQ and before EventRead counted it
	// (mlx5): cq then reads the channel's queued events before such an
	// arm.
	ArmNeedsEventsRead() bool
	// Resize makes the CQ hold at least n entries, keeping what it holds.
	Resize(n int) (int, error)
	// Destroy destroys the CQ in the kernel and releases the provider's
	// ring, returning how many completion and async events the kernel
	// reported for it.
	Destroy() (compEvents, asyncEvents uint32, err error)
}

// Hooks are what package cq gives uverbs to make and end its CQs and
// channels, whose insides cq does not export. CQ, Channel, Config and WC
// are cq's *CQ, *Channel, Config and WC: cqseam cannot name them, since
// cq imports it, so the hooks are generic and Of instantiates them.
type Hooks[CQ, Channel, Config, WC any] struct {
	// NewCQ makes a CQ as cfg says (an error wrapping EINVAL for a bad
	// size or vector), calling create for its kernel object and provider
	// ring. dev names the device in errors.
	NewCQ func(dev string, cfg Config, create func(Request) (Backend[WC], error)) (CQ, error)
	// NewChannel makes a Channel that reads completion events from fd,
	// which it then owns. dev names the device in errors.
	NewChannel func(fd int, dev string) (Channel, error)
	// Backend returns the backend create returned for q.
	Backend func(q CQ) Backend[WC]
	// Exclusive runs f while no Poll, ReqNotify or Resize of q can run,
	// unless q is closed (its ring is gone). It takes q's lock: the
	// caller must not hold its device context's lock, which a CQ's Close
	// takes under q's lock. mlx5 needs it when a QP is reset, to take the
	// QP's stale completions out of its CQs, as rdma-core does.
	Exclusive func(q CQ, f func())
	// ShutCQ ends q because its device context closed (the kernel
	// destroyed it with the context): release (the provider's ring) runs
	// under q's lock, before Poll starts returning ErrClosed, and every
	// later call returns ErrClosed. Nothing happens to a closed CQ.
	ShutCQ func(q CQ, release func())
	// ShutChannel ends ch because its device context closed: a parked
	// Wait wakes with ErrClosed, as does every later call. With fds
	// false it only marks ch closed, for a context that closes its
	// kernel objects next (a Wait they wake then says ErrClosed, not what
	// the fd says); a later ShutChannel with fds closes them.
	ShutChannel func(ch Channel, fds bool)
	// Closed reports whether ch is closed.
	Closed func(ch Channel) bool
}

// hooks holds the Hooks package cq registered.
var hooks any

// Register is called by package cq's init with its hooks.
func Register[CQ, Channel, Config, WC any](h Hooks[CQ, Channel, Config, WC]) { hooks = h }

// Of returns the hooks package cq registered, for uverbs, which names
// cq's types when it calls it and so gets hooks typed throughout. The one
// type assertion is here: with cq's own types as the type arguments it
// cannot fail.
func Of[CQ, Channel, Config, WC any]() Hooks[CQ, Channel, Config, WC] {
	return hooks.(Hooks[CQ, Channel, Config, WC])
}
