package uverbs

// SGE is a scatter/gather entry (struct ibv_sge): length bytes at Addr,
// inside a memory region whose local key is LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is what a send work request does (enum ibv_wr_opcode).
type WROpcode uint32

// Send work request opcodes.
const (
	WRRDMAWrite        WROpcode = 0
	WRRDMAWriteWithImm WROpcode = 1
	WRSend             WROpcode = 2
	WRSendWithImm      WROpcode = 3
	WRRDMARead         WROpcode = 4
	WRAtomicCmpSwp     WROpcode = 5
	WRAtomicFetchAdd   WROpcode = 6
	WRSendWithInv      WROpcode = 9
)

// SendFlags qualify a send work request (enum ibv_send_flags).
type SendFlags uint32

// Send flags.
const (
	// SendFence waits for earlier RDMA reads and atomics to finish first.
	SendFence SendFlags = 1 << 0
	// SendSignaled asks for a completion even when the QP is not SigAll.
	SendSignaled SendFlags = 1 << 1
	// SendSolicited sets the solicited-event bit: the receiver's CQ, armed
	// for solicited completions only, raises an event.
	SendSolicited SendFlags = 1 << 2
	// SendInline copies the payload into the work request at post time:
	// the buffer is free again when PostSend returns, and needs no MR.
	// Sends and RDMA writes only: an RDMA read or an atomic with it is
	// refused (EINVAL).
	SendInline SendFlags = 1 << 3
)

// SendWR is a send work request (struct ibv_send_wr).
type SendWR struct {
	WRID   uint64 // returned in the completion
	Opcode WROpcode
	Flags  SendFlags
	SGL    []SGE
	// Imm is the immediate data of the WithImm opcodes, in host order: the
	// receiver's WC.Imm has the same value. For WRSendWithInv, the rkey to
	// invalidate.
	Imm uint32
	// RDMA and atomics: the remote address and key.
	RemoteAddr uint64
	RKey       uint32
	// Atomics: the compare (or add) operand, and the swap operand.
	CompareAdd uint64
	Swap       uint64
	// UD: the destination.
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR struct {
	WRID uint64
	SGL  []SGE
}
