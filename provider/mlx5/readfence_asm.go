//go:build arm64 || ppc64 || ppc64le || riscv64 || loong64 || mips64 || mips64le

package mlx5

// readFence orders a CQE's owner bit before the reads of the rest of it:
// rdma-core's udma_from_device_barrier, the kernel's dma_rmb. These
// architectures let a load pass an earlier one, so it takes an
// instruction (mmio_$GOARCH.s says which, and why).
func readFence()
