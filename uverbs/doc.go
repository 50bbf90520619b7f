// Package uverbs is the API goverbs users hold: RDMA devices and their
// contexts, and the objects around a completion queue (protection
// domains, memory regions, queue pairs, address handles, async events).
// It speaks to /dev/infiniband/uverbsN directly through the kernel's
// uverbs ioctl ABI, with no cgo and no libibverbs; programs that import
// it build with CGO_ENABLED=0 into static binaries.
//
// # Devices and contexts
//
// [Devices] lists the RDMA devices (ibv_get_device_list); [Open] opens one
// by name (ibv_open_device). The provider (rxe today, mlx5 next) is chosen
// by the device's driver: nothing to register, no configuration files.
// A [Context] answers queries ([Context.QueryDevice], [Context.QueryPort],
// [Context.GIDTable]) and creates everything else. [Context.PortCounters]
// reads a port's hardware counters, as "rdma statistic show" does.
//
// # Objects
//
// A [PD] groups memory regions ([PD.RegMR]), queue pairs ([PD.NewQP]) and
// address handles ([PD.NewAH]). Completion queues and channels are made
// by [Context.NewCQ] and [Context.NewCompChannel] and live in package cq.
// A [QP] moves through RESET, INIT, RTR and RTS with [QP.ConnectRC]
// (RC and UC) or [QP.ConnectUD], from the two sides' [Endpoint]s (whose
// text form is ibv_rc_pingpong's) and [ConnectOptions], or step by step
// with [QP.Modify]; [Context.FindGID] finds the source GID by type and
// address, so that no program hard-codes a GID index. It posts work
// with [QP.PostSend], [QP.PostSendInline] (a payload straight from a
// []byte) and [QP.PostRecv], which allocate nothing; its completions
// arrive on its CQs. A UD receive buffer needs [GRHSize] bytes before the
// payload, from which [ParseGRH] reads the sender's GID or IPv4 address.
// An [SRQ] ([PD.NewSRQ]) is one ring of receives that many QPs take from
// (QPConfig.SRQ), with a limit event to refill it by (docs/SRQ.md).
//
// Memory the device uses should come from [AllocBuffer] (page-aligned,
// outside the Go heap); Go-heap memory works too, under the rules of
// docs/MEMORY.md.
//
// # Errors and lifetimes
//
// A failed verb returns an [*OpError] naming the verb and the device and
// wrapping the cause: errors.Is(err, unix.EINVAL) works, and so does
// errors.Is(err, ErrClosed) for any call after Close. Every Close is
// idempotent in effect: the second returns ErrClosed. Objects hold their
// parents alive (a QP its PD, a PD its Context); close children first,
// or close the Context, which makes the kernel destroy everything on it.
//
// # Concurrency
//
// Every type is safe for concurrent use unless its documentation says
// otherwise; value types (Device, the attributes, the work requests) are
// plain values. Per type:
//
//   - [Context]: every method, from any goroutine. Each call that uses
//     the fd holds a read lock that [Context.Close] takes for writing, so
//     Close waits for calls in flight and the fd number is never reused
//     under one. [Context.WaitAsyncEvent] callers take turns on the fd,
//     each event going to exactly one of them; [Context.TryAsyncEvent]
//     may run beside them. Close wakes a waiting WaitAsyncEvent with
//     [ErrClosed].
//   - [PD], [MR], [AH]: every method; Close serialises on the object's
//     own lock and later calls return ErrClosed.
//   - [QP]: [QP.PostSend] and [QP.PostRecv] each take a lock of their
//     own, since the send queue and the receive queue each have one
//     producer index: many goroutines may post to one QP, a send and a
//     receive post proceed in parallel, and no work request is lost or
//     written twice. Modify, Query and Close may run beside them; Close
//     takes both locks, so it waits for posts in flight.
//   - [SRQ]: [SRQ.PostRecv] takes the SRQ's own lock, as a QP's does;
//     Arm, Query and Close may run beside it, and Close waits for it.
//   - [Buffer]: its methods are safe; its bytes are the caller's to
//     synchronise, and the device's to use while an MR covers them, so
//     close a Buffer only after its MRs and their work requests are done.
//   - [AsyncEvent]: a value; [AsyncEvent.Ack] is one atomic add.
//
// The completion queue side (cq.CQ, cq.Channel) is in package cq's
// documentation. The race detector runs the whole VM suite, which drives
// these from many goroutines (make vmrace; docs/RELIABILITY.md).
//
// # Async events
//
// [Context.WaitAsyncEvent] and [Context.TryAsyncEvent] deliver the
// device's async events (port changes, CQ overruns, QP errors), each
// naming its object by a handle ([cq.CQ.EventHandle], [QP.EventHandle]).
// The Context reads them as they come, whether or not the program asks,
// and acts on two itself: a CQ_ERR breaks the CQ it names (Poll hands
// out what the ring still holds, then fails with [ErrCQOverrun]), and a
// DEVICE_FATAL breaks every CQ and QP of the Context likewise, with
// [ErrDeviceFatal]. Events nobody waits for stay queued for the next
// WaitAsyncEvent or TryAsyncEvent.
package uverbs
