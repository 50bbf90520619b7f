//go:build 386 || amd64

package mlx5

// readFence orders a CQE's owner bit before the reads of the rest of it.
// On x86 (amd64 and 386) that takes no instruction. x86 never lets a load
// pass an earlier load, and the device writes the CQ ring, ordinary
// cacheable memory, through the coherent DMA path, so the CPU sees the
// CQE's bytes in the order the device wrote them: its body before its
// owner bit. The Linux kernel's dma_rmb, the barrier for exactly this (a
// descriptor's ownership bit, then its contents;
// Documentation/memory-barriers.txt), is a compiler barrier on x86. Here
// the compiler is held by the owner bit's load itself: it is a
// sync/atomic load (opOwnWord), and Go's compiler moves no later load of
// memory above an atomic one.
//
// rdma-core's udma_from_device_barrier issues an LFENCE here (on 386 a
// locked add, for CPUs without SSE2). goverbs does not: an LFENCE waits
// for every earlier load to finish, 40 % of a one-CQE poll on the host,
// with nothing for it to order.
func readFence() {}
