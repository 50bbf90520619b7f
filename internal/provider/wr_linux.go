package provider

import "unsafe"

// SGE is a scatter/gather entry, laid out as struct ibv_sge and struct
// rxe_sge: {addr u64, length u32, lkey u32}.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// Work request opcodes (enum ibv_wr_opcode).
const (
	WRRDMAWrite        = 0
	WRRDMAWriteWithImm = 1
	WRSend             = 2
	WRSendWithImm      = 3
	WRRDMARead         = 4
	WRAtomicCmpSwp     = 5
	WRAtomicFetchAdd   = 6
	WRLocalInv         = 7
	WRBindMW           = 8
	WRSendWithInv      = 9
	WRFlush            = 14
	WRAtomicWrite      = 15
)

// Flush placement types and selectivity levels (enum ib_placement_type,
// enum ib_selectivity_level).
const (
	FlushGlobal     = 1 << 0
	FlushPersistent = 1 << 1
	FlushRange      = 0
	FlushMR         = 1
)

// Send flags (enum ibv_send_flags).
const (
	SendFence     = 1 << 0
	SendSignaled  = 1 << 1
	SendSolicited = 1 << 2
	SendInline    = 1 << 3
)

// SendWR is a send work request as the providers take it.
type SendWR struct {
	WRID   uint64
	Opcode uint32
	Flags  uint32
	SGL    []SGE
	// Imm is the immediate data in host order (the provider puts it on the
	// wire big-endian), the rkey to invalidate for WRSendWithInv, or the
	// length of a WRFlush's range.
	Imm uint32
	// WRFlush: its placement type (FlushGlobal, FlushPersistent) and
	// selectivity level (FlushRange, FlushMR).
	FlushType  uint8
	FlushLevel uint8
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64
	Swap       uint64 // also WRAtomicWrite's 8 bytes, in host order
	// UD only.
	AH         *AHRef
	RemoteQPN  uint32
	RemoteQKey uint32
	// WRBindMW: what to bind; WRLocalInv: Bind.MW is the window.
	Bind *MWBindRef
}

// MWBindRef is what a WRBindMW request binds, laid out as uverbs.MWBind:
// its MW and MR point at handles whose first field is the provider's
// view of them (MWRef, MRRef), as AHRef does for address handles.
type MWBindRef struct {
	MW     *MWRef
	MR     *MRRef // nil, with Length 0, unbinds a type-1 window
	Addr   uint64
	Length uint64
	Access uint32 // the window's IB_ACCESS_* rights
}

// MRRef is a memory region as the providers see it: its keys, where it
// lies (its I/O virtual address and length) and its access flags.
type MRRef struct {
	LKey, RKey uint32
	IOVA       uint64
	Length     uint64
	Access     uint32
}

// AHRef is how a send request names its address handle: a pointer to a
// handle whose first field is the provider's AH. uverbs.AH is laid out so
// (checked there), which lets uverbs hand its callers' requests to the
// provider as they are, with no copy.
type AHRef struct{ AH AH }

// RecvWR is a receive work request.
type RecvWR struct {
	WRID uint64
	SGL  []SGE
}

// UserBytes views length bytes at a caller's address (an SGE's addr) as a
// slice, for inline sends, which copy the payload at post time. The
// address is the caller's memory (a registered buffer, or a slice the
// caller keeps alive across PostSend), never a Go stack address. The
// bits are reinterpreted rather than converted from uintptr, the form vet
// accepts for an address that did not come from an unsafe.Pointer here.
func UserBytes(addr uint64, length uint32) []byte {
	if length == 0 {
		return nil
	}
	a := uintptr(addr)
	p := *(*unsafe.Pointer)(unsafe.Pointer(&a))
	return unsafe.Slice((*byte)(p), length)
}
