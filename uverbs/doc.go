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
// [Context.GIDTable]) and creates everything else.
//
// # Objects
//
// A [PD] groups memory regions ([PD.RegMR]), queue pairs ([PD.NewQP]) and
// address handles ([PD.NewAH]). Completion queues and channels are made
// by [Context.NewCQ] and [Context.NewCompChannel] and live in package cq.
// A [QP] moves through RESET, INIT, RTR and RTS with [QP.Modify], and
// posts work with [QP.PostSend] and [QP.PostRecv], which allocate nothing;
// its completions arrive on its CQs.
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
// Every type is safe for concurrent use unless its documentation says
// otherwise.
//
// # Async events
//
// [Context.WaitAsyncEvent] and [Context.TryAsyncEvent] deliver the
// device's async events (port changes, CQ overruns, QP errors), each
// naming its object by a handle ([cq.CQ.EventHandle], [QP.EventHandle]).
package uverbs
