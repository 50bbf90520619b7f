//go:build mips64 || mips64le

#include "textflag.h"

// func mmioStore64(p unsafe.Pointer, v uint64)
// mmio_write64_be: one aligned 8-byte SD.
TEXT ·mmioStore64(SB), NOSPLIT, $0-16
	MOVV p+0(FP), R1
	MOVV v+8(FP), R2
	MOVV R2, (R1)
	RET

// func dmaFence()
// udma_to_device_barrier: SYNC, as rdma-core's. SYNC (stype 0) completes
// every earlier load and store, cached or uncached, before any later one.
TEXT ·dmaFence(SB), NOSPLIT, $0-0
	SYNC
	RET

// func readFence()
// udma_from_device_barrier: SYNC, as rdma-core's; see dmaFence.
TEXT ·readFence(SB), NOSPLIT, $0-0
	SYNC
	RET

// func wcFence()
// mmio_wc_start and mmio_flush_writes: SYNC, as rdma-core's; see dmaFence.
TEXT ·wcFence(SB), NOSPLIT, $0-0
	SYNC
	RET
