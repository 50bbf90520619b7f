#include "textflag.h"

// func mmioStore64(p unsafe.Pointer, v uint64)
TEXT ·mmioStore64(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET

// func dmaFence(): x86 keeps stores in order; the call is the compiler barrier.
TEXT ·dmaFence(SB), NOSPLIT, $0-0
	RET

// func wcFence()
TEXT ·wcFence(SB), NOSPLIT, $0-0
	SFENCE
	RET
