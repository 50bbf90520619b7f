#include "textflag.h"

TEXT ·Fence(SB), NOSPLIT, $0-0
	MFENCE
	RET
