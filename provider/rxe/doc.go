// Package rxe will be the soft-RoCE (rdma_rxe) provider: the memory-mapped
// completion, send and receive queues the kernel shares with user space
// (struct rxe_queue_buf), polled and posted without system calls except
// the send doorbell.
//
// It is empty so far.
package rxe
