//go:build !race

#include "textflag.h"

// func StoreRelease32(p *uint32, v uint32)
// x86 (TSO) keeps stores in program order: a plain store is a release.
TEXT ·StoreRelease32(SB), NOSPLIT, $0-12
	MOVQ p+0(FP), AX
	MOVL v+8(FP), BX
	MOVL BX, (AX)
	RET
