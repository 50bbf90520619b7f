#include "textflag.h"

// func mmioStore64(p unsafe.Pointer, v uint64)
// mmio_write64_be: one aligned 8-byte ST.D.
TEXT ·mmioStore64(SB), NOSPLIT, $0-16
	MOVV p+0(FP), R4
	MOVV v+8(FP), R5
	MOVV R5, (R4)
	RET

// func dmaFence()
// udma_to_device_barrier: DBAR 0, as rdma-core's. Hint 0 is LoongArch's
// full barrier, which orders every earlier load and store before every
// later one, device memory included.
TEXT ·dmaFence(SB), NOSPLIT, $0-0
	DBAR $0
	RET

// func readFence()
// udma_from_device_barrier: DBAR 0, as rdma-core's; see dmaFence.
TEXT ·readFence(SB), NOSPLIT, $0-0
	DBAR $0
	RET

// func wcFence()
// mmio_wc_start and mmio_flush_writes: DBAR 0, as rdma-core's; see
// dmaFence.
TEXT ·wcFence(SB), NOSPLIT, $0-0
	DBAR $0
	RET
