// Package mlx5model is a device model of a ConnectX (mlx5) adapter and its
// kernel driver, in-process: goverbs' mlx5 provider runs against it
// unchanged, so its rings, doorbells and driver data are proven without
// hardware.
//
// A [Device] plays two parts.
//
// The kernel (control path): each [Context] is one open uverbs fd. It
// implements transport.Kernel, so every uverbs command the stack sends
// (ioctls, and write commands inside UVERBS_METHOD_INVOKE_WRITE) reaches
// the model instead of the char device, and is answered as Linux 6.1 with
// mlx5_ib answers it: the attribute rules of the ioctl framework, the core
// objects and handles, and the mlx5 driver data (mlx5_ib_alloc_ucontext,
// mlx5_ib_create_cq, mlx5_ib_create_qp, mlx5_ib_resize_cq,
// mlx5_ib_create_srq and its modify, query and destroy,
// mlx5_ib_create_ah_resp, mlx5_ib_alloc_mw, the UAR driver object).
// Completion channels and the async event fd are pipes, written as the
// kernel queues events.
// Context.FD is a memfd that stands for the uverbs fd: the provider mmaps
// UAR pages from it, and the model maps the same pages and watches them
// as ordinary memory.
//
// The HCA (data path): one goroutine per Device scans the UAR pages for
// doorbells (an 8-byte store, consumed by a compare-and-swap back to
// zero). A send doorbell makes it read the QP's doorbell record and
// execute the posted WQEs (ctrl, remote-address, atomic, datagram, data
// and inline segments, wrapping at the end of the ring), moving bytes
// between registered buffers after checking keys, ranges, protection
// domains and access rights; RC waits (RNR) for a receive. Memory
// windows are mkeys of their own, which UMR WQEs bind (to a range of an
// MR and, for type 2, to the posting QP) and free, and a send with
// invalidate frees at its responder; an access through a window is held
// to its range, rights and QP. A QP on a
// shared receive queue takes its receives from the SRQ's linked WQEs in
// list order (its own place in the list, and a count of WQEs taken
// against the doorbell record's), its CQEs naming the SRQ's WQE; an
// armed SRQ limit raises SRQ_LIMIT_REACHED once, and a QP on an SRQ
// moved to the error state raises QP_LAST_WQE_REACHED instead of
// flushing receives it does not own. It writes
// 64-byte CQEs big-endian with the owner bit of the pass and, but for
// an error CQE, a timestamp (its free-running clock's ticks, or the
// time of day for a CQ that asks for real-time timestamps of a device
// in real-time mode, Options.RealTimeClock), op_own last with a
// release store, never over one the consumer has not freed (an
// overrun breaks the CQ and raises the async event CQ_ERR). An arm
// doorbell arms the CQ for one event, next or solicited, honouring the
// arm sequence number; only a CQE written after the arm fires it.
//
// What the model finds wrong in what the provider does (a doorbell that
// names the wrong WQE, a ring the provider sized too small, a CQ buffer
// whose entries look valid before the device wrote any, flags the
// provider must never set) is a violation: [Device.Err] reports them all,
// and the test fixtures fail the test with them.
//
// Faults can be injected ([Device.InjectError]), and the device removed
// under open contexts as a hardware driver's is ([Device.Remove]);
// [Device.Stats] counts what the HCA did.
//
// The package is Linux-only (memfd, pipes); it uses the stack's own
// transport types, never the uverbs package, so it tests the provider
// through any layer above it.
package mlx5model
