//go:build ppc64 || ppc64le

#include "textflag.h"

// func mmioStore64(p unsafe.Pointer, v uint64)
// mmio_write64_be: one aligned 8-byte STD. Not sync/atomic's store,
// which adds a SYNC of its own.
TEXT ·mmioStore64(SB), NOSPLIT, $0-16
	MOVD p+0(FP), R3
	MOVD v+8(FP), R4
	MOVD R4, (R3)
	RET

// func dmaFence()
// udma_to_device_barrier: SYNC (heavyweight sync), as rdma-core's. Its
// contract covers stores to memory of any kind before the doorbell, and
// LWSYNC orders stores to cacheable memory only.
TEXT ·dmaFence(SB), NOSPLIT, $0-0
	SYNC
	RET

// func readFence()
// udma_from_device_barrier: LWSYNC, as rdma-core's. The CQ ring is
// cacheable memory, where LWSYNC keeps later loads (the CQE's body) after
// an earlier one (its owner bit) at less cost than SYNC.
TEXT ·readFence(SB), NOSPLIT, $0-0
	LWSYNC
	RET

// func wcFence()
// mmio_wc_start and mmio_flush_writes: SYNC, as rdma-core's. Only SYNC
// orders a store to cache-inhibited memory (the UAR) against stores to
// cacheable memory (the doorbell record), and waits for it to complete.
TEXT ·wcFence(SB), NOSPLIT, $0-0
	SYNC
	RET
