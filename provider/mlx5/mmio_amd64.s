#include "textflag.h"

// func mmioStore64(p unsafe.Pointer, v uint64)
// mmio_write64_be: one aligned 8-byte MOV, never split or merged. Not
// sync/atomic's store: that is an XCHG, a locked operation, on uncached
// device memory.
TEXT ·mmioStore64(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET

// func dmaFence()
// udma_to_device_barrier: x86 keeps stores in order, so, as in rdma-core,
// the call itself, a compiler barrier, is all it takes.
TEXT ·dmaFence(SB), NOSPLIT, $0-0
	RET

// func wcFence()
// mmio_wc_start and mmio_flush_writes: SFENCE, as rdma-core's. It orders
// the write-combining UAR store against ordinary stores, which x86's
// store order does not cover, and drains it from the write-combining
// buffer.
TEXT ·wcFence(SB), NOSPLIT, $0-0
	SFENCE
	RET
