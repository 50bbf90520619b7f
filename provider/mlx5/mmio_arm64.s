#include "textflag.h"

// func mmioStore64(p unsafe.Pointer, v uint64)
// mmio_write64_be: one aligned 8-byte STR.
TEXT ·mmioStore64(SB), NOSPLIT, $0-16
	MOVD p+0(FP), R0
	MOVD v+8(FP), R1
	MOVD R1, (R0)
	RET

// func dmaFence()
// udma_to_device_barrier: DMB OSHST, as rdma-core's. It orders earlier
// stores before later ones in the outer-shareable domain, which the
// device's DMA reads are in.
TEXT ·dmaFence(SB), NOSPLIT, $0-0
	DMB $0x2 // OSHST
	RET

// func readFence()
// udma_from_device_barrier: DMB OSHLD, as rdma-core's and the kernel's
// dma_rmb. arm64 lets a load pass an earlier one; this keeps the CQE's
// body after its owner bit.
TEXT ·readFence(SB), NOSPLIT, $0-0
	DMB $0x1 // OSHLD
	RET

// func wcFence()
// mmio_wc_start and mmio_flush_writes: DSB ST, as rdma-core's. A DMB
// only orders; the DSB also waits for the write-combining UAR store to
// complete, so it is neither merged with the next one nor held back.
TEXT ·wcFence(SB), NOSPLIT, $0-0
	DSB $0xe // ST
	RET
