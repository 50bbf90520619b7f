package mlx5

// readFence orders a CQE's owner bit before the reads of the rest of it:
// dmb oshld (mmio_arm64.s), the kernel's dma_rmb and rdma-core's
// udma_from_device_barrier on arm64, whose loads may pass one another.
func readFence()
