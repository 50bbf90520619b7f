#include "textflag.h"

// func mmioStore64(p unsafe.Pointer, v uint64)
TEXT ·mmioStore64(SB), NOSPLIT, $0-16
	MOVD p+0(FP), R0
	MOVD v+8(FP), R1
	MOVD R1, (R0)
	RET

// func dmaFence(): dmb oshst
TEXT ·dmaFence(SB), NOSPLIT, $0-0
	DMB $0x2
	RET

// func readFence(): dmb oshld
TEXT ·readFence(SB), NOSPLIT, $0-0
	DMB $0x1
	RET

// func wcFence(): dsb st
TEXT ·wcFence(SB), NOSPLIT, $0-0
	DSB $0xe
	RET
