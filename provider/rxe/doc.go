// Package rxe is goverbs' provider for soft-RoCE (the rdma_rxe kernel
// driver). It creates contexts, CQs, QPs, SRQs and AHs with rxe's driver
// data, and polls and posts on the memory-mapped queues the kernel shares
// with user space (struct rxe_queue_buf) without system calls, except the
// send doorbell.
//
// Like a database/sql driver, the package exports nothing and there is
// nothing to call: it registers itself with goverbs' provider seam
// (internal/provider) for RDMA_DRIVER_RXE when it is initialised, and
// uverbs, which imports it, selects it for every device whose driver id
// (from RDMA netlink) is RDMA_DRIVER_RXE. A program that imports uverbs
// has it.
package rxe
