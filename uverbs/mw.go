package uverbs

// MWType is a memory window's type (enum ibv_mw_type).
type MWType uint8

// Memory window types. A type-1 window is open to every QP of its PD; a
// type-2 window to the one QP that bound it, and only until it is
// invalidated.
const (
	MWType1 MWType = 1
	MWType2 MWType = 2
)

// ReregFlags say what MR.Rereg changes (ibv_rereg_mr's
// IBV_REREG_MR_CHANGE_*, the kernel's values).
type ReregFlags uint32

// Rereg flags. Changing the memory itself (IBV_REREG_MR_CHANGE_TRANSLATION)
// is not offered: register the new memory and close the old region.
const (
	ReregPD     ReregFlags = 1 << 1
	ReregAccess ReregFlags = 1 << 2
)
