#include "textflag.h"

// The Go assembler's FENCE is fence iorw,iorw; the narrower fences
// rdma-core uses are WORDs: FENCE pred,succ with bits I=8 O=4 R=2 W=1 in
// pred (instruction bits 27:24) and succ (23:20), opcode 0x0f.

// func mmioStore64(p unsafe.Pointer, v uint64)
// mmio_write64_be: one aligned 8-byte SD.
TEXT ·mmioStore64(SB), NOSPLIT, $0-16
	MOV p+0(FP), A0
	MOV v+8(FP), A1
	MOV A1, (A0)
	RET

// func dmaFence()
// udma_to_device_barrier: fence ow,ow, as rdma-core's: earlier memory and
// device-output writes before later ones, so the device reads the WQEs
// it is told of.
TEXT ·dmaFence(SB), NOSPLIT, $0-0
	WORD $0x0550000f // fence ow,ow
	RET

// func readFence()
// udma_from_device_barrier: fence ir,ir, as rdma-core's: the CQE's body
// (a memory read) after its owner bit (an earlier memory read); the I
// bits cover device-input reads as well.
TEXT ·readFence(SB), NOSPLIT, $0-0
	WORD $0x0aa0000f // fence ir,ir
	RET

// func wcFence()
// mmio_wc_start and mmio_flush_writes: fence ow,ow, as rdma-core's: the
// doorbell record's store (memory) before the UAR store (device output),
// and that before any later write.
TEXT ·wcFence(SB), NOSPLIT, $0-0
	WORD $0x0550000f // fence ow,ow
	RET
