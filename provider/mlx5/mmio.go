package mlx5

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/errs"
)

// The fences and the MMIO store of the mlx5 data path: rdma-core's
// util/udma_barrier.h and util/mmio.h, one Go assembly stub each
// (mmio_<arch>.s), as that header maps them unless a note says otherwise:
//
//	            dmaFence        readFence     wcFence              mmioStore64
//	amd64       (none)          (none) ¹      sfence               mov 8 bytes
//	386         (none)          (none) ¹      lock addl $0,(sp)    movq from xmm
//	arm64       dmb oshst       dmb oshld     dsb st               str
//	ppc64(le)   sync            lwsync        sync                 std
//	riscv64     fence ow,ow     fence ir,ir   fence ow,ow          sd
//	loong64     dbar 0          dbar 0        dbar 0               st.d
//	mips64(le)  sync            sync          sync                 sd
//
//	dmaFence     udma_to_device_barrier: the WQEs before the doorbell record
//	readFence    udma_from_device_barrier: a CQE's owner bit before its body
//	wcFence      mmio_wc_start / mmio_flush_writes: around a UAR store
//	mmioStore64  mmio_write64_be: the UAR doorbell, one 8-byte store
//
// (none) is a bodiless call, which Go's compiler treats as a compiler
// barrier, as rdma-core's asm("" ::: "memory") is on x86. ¹ rdma-core
// issues lfence (386: a locked add) for udma_from_device_barrier; goverbs
// does not, for the reason in readfence_x86.go.
//
// sync/atomic is not used for the UAR: on amd64 its 64-bit store is an
// XCHG, a locked operation on uncached device memory, and on ppc64 it
// adds fences of its own. The doorbell records live in ordinary memory
// and are stored with package release's release store (storeBE32): a
// plain MOV on x86, as rdma-core's, and sync/atomic's Store elsewhere.
//
// Every other GOARCH (s390x, 32-bit arm and mips among those goverbs
// builds for) gets mmio_other.go, and Open refuses a device there
// (archRefusal) rather than guess; refusal says why for each.

// refusal is the error Open returns on a GOARCH without device barriers
// (archRefusal in mmio_other.go), saying why. It wraps
// errs.ErrNotSupported.
func refusal(goarch string) error {
	why := "rdma-core's util/udma_barrier.h maps none"
	switch goarch {
	case "s390x":
		// util/mmio.h: s390x reaches PCI memory with the PCI store
		// instructions (pcistgi, z15 and later) or the s390_pci_mmio_write
		// system call; an ordinary store to a UAR mapping is no doorbell.
		why = "PCI memory takes pcistgi or the s390_pci_mmio_write system call, not a store"
	case "arm":
		// util/udma_barrier.h has no case for 32-bit ARM: rdma-core does
		// not build there.
		why = "rdma-core defines none for 32-bit ARM"
	case "mips", "mipsle":
		// rdma-core's mmio_write64_be splits the doorbell into two 4-byte
		// stores under a process-wide lock; goverbs has no such path.
		why = "no 8-byte store for the doorbell"
	}
	return fmt.Errorf("mlx5: no device barriers for GOARCH=%s (%s): goverbs does not drive ConnectX here: %w",
		goarch, why, errs.ErrNotSupported)
}
