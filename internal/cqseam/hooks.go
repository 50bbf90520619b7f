package cqseam

// Request is what a CQ's kernel object is made from.
type Request struct {
	Size       int
	ChannelFD  int // -1 for none
	Vector     int
	UserHandle uint64 // the key events carry back
}

// NewCQ makes a *cq.CQ as cfg, a cq.Config, says (an error wrapping
// EINVAL for a bad size or vector), calling create for its kernel object
// and provider ring. dev names the device in errors.
//
// create returns the CQ's backend: a value with the methods
//
//	Handle() uint32
//	Size() int
//	Ring(l *RingLock) any
//	ReqNotify(solicitedOnly bool) error
//	EventRead()
//	Resize(n int) (int, error)
//	Destroy() (compEvents, asyncEvents uint32, err error)
//
// and optionally ArmNeedsEventsRead() bool, true where the device ignores
// an arm made after an event fired and before EventRead counted it
// (mlx5: cq then reads the channel's queued events before such an arm).
// Ring returns the provider's ring, which has
// PollRing(wcs []cq.WC, l *RingLock) (int, error) and serves every Poll
// of the CQ (one call into the provider, no lock for an empty ring); the
// backend may keep l, to Fail the CQ.
var NewCQ func(dev string, cfg any, create func(Request) (any, error)) (any, error)

// NewChannel makes a *cq.Channel that reads completion events from fd,
// which it then owns. dev names the device in errors.
var NewChannel func(fd int, dev string) (any, error)

// Backend returns the backend create returned for q, a *cq.CQ.
var Backend func(q any) any

// Exclusive runs f while no Poll, ReqNotify or Resize of q (a *cq.CQ) can
// run, unless q is closed (its ring is gone). It does nothing for another
// type. It takes q's lock: the caller must not hold its device context's
// lock, which a CQ's Close takes under q's lock. mlx5 needs it when a QP is
// reset, to take the QP's stale completions out of its CQs, as rdma-core
// does.
var Exclusive func(q any, f func())

// Shut ends obj, a *cq.CQ or a *cq.Channel, because its device context
// closed (the kernel destroyed it with the context): every later call on
// it returns ErrClosed, and a Wait parked on a channel wakes with
// ErrClosed. For a CQ, release (the provider's ring) runs under the CQ's
// lock, before Poll starts returning ErrClosed. A channel is marked
// closed, and with a nil release its fds are closed too (a non-nil one,
// which is not called, marks it only: its waits then end with ErrClosed
// whatever the fd says, and a later Shut closes the fds). It does
// nothing more for an object already closed.
var Shut func(obj any, release func())

// Closed reports whether ch, a *cq.Channel, is closed.
var Closed func(ch any) bool
