// Package rxe is the soft-RoCE (rdma_rxe) provider. It creates contexts,
// CQs, QPs and AHs with rxe's driver data, and polls and posts on the
// memory-mapped queues the kernel shares with user space (struct
// rxe_queue_buf) without system calls, except the send doorbell.
//
// # No compatibility promise
//
// Users never import it: uverbs picks it for devices whose driver id is
// RDMA_DRIVER_RXE. Its exported names are the provider seam
// (internal/provider), which changes with goverbs' internals: the package
// carries no user-facing API and no compatibility promise.
package rxe
