//go:build !race

#include "textflag.h"

// func StoreRelease32(p *uint32, v uint32)
TEXT ·StoreRelease32(SB), NOSPLIT, $0-12
	MOVD p+0(FP), R0
	MOVW v+8(FP), R1
	STLRW R1, (R0)
	RET
