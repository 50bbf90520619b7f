#include "textflag.h"

// func mmioStore64(p unsafe.Pointer, v uint64)
// mmio_write64_be: 386 has no 8-byte integer store, so the value goes
// through an SSE register: one aligned 8-byte MOVQ, as rdma-core's i386
// MOVLPS, never two 4-byte TLPs. Go's 386 port already requires SSE2.
TEXT ·mmioStore64(SB), NOSPLIT, $0-12
	MOVL p+0(FP), AX
	MOVQ v+4(FP), X0
	MOVQ X0, (AX)
	RET

// func dmaFence()
// udma_to_device_barrier: x86 keeps stores in order, so, as in rdma-core,
// the call itself, a compiler barrier, is all it takes.
TEXT ·dmaFence(SB), NOSPLIT, $0-0
	RET

// func wcFence()
// mmio_wc_start and mmio_flush_writes: a locked add of 0 to the top of
// the stack, as rdma-core's i386 barrier. A locked operation orders the
// write-combining UAR store against every other store and drains the
// write-combining buffers, on every x86, SFENCE or not.
TEXT ·wcFence(SB), NOSPLIT, $0-0
	LOCK
	ADDL $0, (SP)
	RET
