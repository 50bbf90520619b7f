// Package cq implements completion queues: the queues an RDMA device
// reports finished work requests on, and the completion channels that
// say "this CQ has something".
//
// # Polling
//
// [CQ.Poll] moves completions into a slice the caller owns, with no
// system call and no allocation, never taking one it has no room for.
// On an error completion only WRID, Status, QPNum and VendorErr mean
// anything ([WC]). Poll fills every field libibverbs' extended CQ
// reads one by one, so there is no second poll API; completion
// timestamps are a creation option ([Config].Timestamps), which rxe
// refuses.
//
// # Events
//
// Arming is one-shot: [CQ.ReqNotify], then poll until the CQ is empty,
// then [Channel.Wait], then [CQ.Ack], then arm again. A completion that
// was already in the CQ when it was armed raises no event, which is why
// the poll comes after the arm. [Channel.Serve] runs that loop for one or
// many CQs and cannot lose a completion. A wait parks its goroutine on
// the Go runtime's poller, not an OS thread, and ends when its context
// does; [Channel.TryWait] never blocks, and says whether it found an event.
//
// One channel serves many CQs: an event names its CQ through a handle
// table, never a raw pointer.
//
// # Lifetimes
//
// CQs and channels come from a device context (uverbs.Context.NewCQ and
// NewCompChannel). Close a CQ before its channel: closing a channel that a
// CQ still uses fails with EBUSY, as ibv_destroy_comp_channel does.
// Closing a CQ with events it delivered still unacknowledged fails with
// EBUSY and the count, where ibv_destroy_cq would block forever.
//
// # Concurrency
//
// [CQ] and [Channel] are safe for concurrent use, every method:
//
//   - [CQ.Poll], [CQ.ReqNotify], [CQ.Resize] and [CQ.Close] of one CQ
//     serialise on one lock: the ring has one consumer index, so
//     goroutines polling one CQ take turns, each completion goes to
//     exactly one Poll, and a Close racing a Poll never unmaps the ring
//     under it (the racing Poll returns 0 or [ErrClosed]). A Poll that
//     finds the CQ empty takes no lock: it reads the ring's two
//     indices (rxe) or the next CQE's owner bit (mlx5), and the provider keeps a ring it gave back readable until
//     nothing can reach it. [CQ.Ack] and [CQ.Unacked] are
//     lock-free.
//   - One [Channel.Wait] or [Channel.TryWait] at a time reads the
//     channel's fd; the others queue, each event going to exactly one of
//     them (a TryWait that finds a Wait reading returns false: the Wait takes the event).
//     Close wakes a waiting Wait with [ErrClosed].
//   - [Channel.Serve] owns the channel's events while it runs: run one
//     per channel, and no other Wait or TryWait on that channel, since an
//     event another caller takes is one Serve never sees, and the CQ it
//     names is left unarmed. Poll its CQs from other goroutines freely.
//
// docs/CQ.md in the repository gives the full semantics, the concurrency
// contract, and where soft-RoCE departs from the man pages.
package cq
