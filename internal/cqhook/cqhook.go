// Package cqhook lets uverbs reach into package cq where a provider or a
// device context needs it, without a public API for it: package cq sets
// the functions below when it is initialised.
package cqhook

// Exclusive runs f while no Poll, ReqNotify or Resize of q (a *cq.CQ) can
// run. It does nothing for another type. mlx5 needs it when a QP is
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
