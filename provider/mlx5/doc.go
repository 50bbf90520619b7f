// Package mlx5 is goverbs' provider for NVIDIA/Mellanox ConnectX-4 and
// later (the mlx5 kernel driver): the user-space half of the data path,
// written against the device's ring layouts. It is the rxe provider's
// twin behind the same seam (internal/provider), so package cq and
// package uverbs work unchanged on either.
//
// Like a database/sql driver, the package exports nothing and there is
// nothing to call: it registers itself with goverbs' provider seam
// (internal/provider) for RDMA_DRIVER_MLX5 when it is initialised, and
// uverbs, which imports it, selects it for every device whose driver id
// (from RDMA netlink) is RDMA_DRIVER_MLX5. A program that imports uverbs
// has it.
//
// What it owns:
//
//   - Context: GET_CONTEXT with mlx5 driver data, asking for dynamic UARs
//     (kernel ≥ 5.8) and falling back to the static ones; one UAR page for
//     CQ arm doorbells and one for QP send doorbells, mmapped from the
//     uverbs fd; the CQE version (1: CQEs name QPs by a user index).
//   - CQ: a ring of 64-byte CQEs in page-aligned memory outside the Go
//     heap (MADV_DONTFORK), every CQE invalid at first, and a doorbell
//     record. Poll reads a CQE when its owner bit matches the pass of the
//     consumer index, fences, decodes it and finds the work request's
//     wr_id in its QP's queue; the consumer index goes to the doorbell
//     record once per batch. An empty CQ is polled with no lock (PollRing):
//     one look at the op_own of the CQE at the consumer index;
//     a ring given back (Destroy, Release, Resize) is covered at once by a
//     read-only placeholder, unmapped once nothing can reach it, so that
//     look never faults. ReqNotify writes the arm word to the doorbell
//     record and rings the UAR with one 8-byte big-endian store, no
//     syscall; the arm sequence number advances per event read. Resize
//     copies what precedes the device's resize CQE into the new ring.
//     Compressed CQEs and scatter-to-CQE are never asked for.
//   - QP: RC, UC and UD send queues of 64-byte basic blocks (ctrl,
//     remote-address, atomic, datagram, data and inline segments, wrapping
//     at the end of the ring), receive queues of data-segment lists, the
//     doorbell record, and the 8-byte UAR doorbell (no BlueFlame).
//   - SRQ: a buffer of WQEs (a next segment, then data segments) linked
//     into a free list by their next indexes, a doorbell record counting
//     the receives posted, and the wr_ids by WQE index. A post takes WQEs
//     from the list's head; Poll finds a receive's wr_id by the CQE's
//     wqe_counter and links the WQE back after the tail, under the SRQ's
//     lock. A QP on an SRQ has no receive queue of its own; a destroyed
//     one leaves a stand-in that gives its queued receives' WQEs back.
//     mlx5_ib cannot resize an SRQ.
//
// The fences and the UAR store are small Go assembly stubs, one file per
// architecture (mmio_$GOARCH.s), mapped as rdma-core's
// util/udma_barrier.h maps them (the table in mmio.go) and pinned by a
// test that disassembles cross-built binaries; on s390x, 32-bit arm and
// mips, where goverbs knows no barriers or UAR store to stand behind,
// opening a ConnectX fails with an error wrapping ErrNotSupported. The doorbell
// records are ordinary memory, ordered with sync/atomic. Every
// multi-byte field the device sees is big-endian.
//
// No ConnectX is needed to test it: internal/mlx5model plays the kernel
// driver and the HCA in-process, and the conformance suite runs against
// it (make model).
//
// # Environment
//
// GOVERBS_MLX5_UAR picks the UARs a context asks for: "dynamic" (kernel
// ≥ 5.8; the open fails without them), "static" (the registers the kernel
// maps at context creation, as before 5.8), or unset (any other value
// counts as unset): dynamic where the kernel grants them, else static, as
// rdma-core does. The hardware checklist (internal/cmd/hwcheck) sets it
// to prove both kinds on one kernel.
package mlx5
