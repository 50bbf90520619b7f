package mlx5

// The fences and the MMIO store of the mlx5 data path (rdma-core's
// util/udma_barrier.h, in Go assembly where Go has no primitive):
//
//	                 amd64                 arm64
//	dmaFence         compiler barrier      dmb oshst   before a doorbell record
//	readFence        none (readfence_amd64) dmb oshld  after a CQE's owner bit
//	wcFence          sfence                dsb st      around a UAR store
//	mmioStore64      one 8-byte mov        one str     the UAR doorbell
//
// sync/atomic is not used for the UAR: on amd64 its 64-bit store is an
// XCHG, a locked operation on uncached device memory. The doorbell
// records live in ordinary memory and are stored with package release's
// release store (storeBE32): a plain MOV on x86, as rdma-core's, and
// sync/atomic's Store elsewhere.
