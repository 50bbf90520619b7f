// Package rxe is the soft-RoCE (rdma_rxe) provider. It creates contexts,
// CQs, QPs and AHs with rxe's driver data, and will poll and post on the
// memory-mapped queues the kernel shares with user space (struct
// rxe_queue_buf) without system calls, except the send doorbell.
//
// Users never import it: uverbs picks it for devices whose driver id is
// RDMA_DRIVER_RXE.
package rxe
