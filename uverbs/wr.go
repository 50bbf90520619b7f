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
	// WRLocalInv invalidates the type-2 memory window Bind.MW (RC only):
	// a peer's access with its key fails from then on. The window must be
	// bound by a bind posted here since it was last invalidated; anything
	// else is refused with EINVAL, since rxe's kernel panics on it.
	WRLocalInv WROpcode = 7
	// WRBindMW binds a memory window to memory as Bind says (RC and UC).
	WRBindMW      WROpcode = 8
	WRSendWithInv WROpcode = 9
	// WRFlush makes data a peer wrote into [RemoteAddr, +Imm) of the
	// region RKey names visible (FlushGlobal) or persistent
	// (FlushPersistent) before it completes, or all of that region
	// (FlushMR): see FlushType and FlushLevel. RC only; rxe from Linux
	// 6.2, where the region and the peer's QP allow it
	// (AccessFlushGlobal, AccessFlushPersistent). Elsewhere it fails with
	// ErrNotSupported, before anything is posted.
	WRFlush WROpcode = 14
	// WRAtomicWrite writes Swap's 8 bytes at RemoteAddr, 8-aligned,
	// atomically at the peer, after the requests before it (RC only;
	// the peer's region needs AccessRemoteWrite). The bytes land as they
	// lie in this host's memory: a peer of the same byte order reads
	// Swap back. rxe from Linux 6.2; elsewhere ErrNotSupported.
	WRAtomicWrite WROpcode = 15
)

// FlushType is what a WRFlush makes of the data (enum ibv_placement_type).
type FlushType uint8

// Flush placement types; a request may ask for both.
const (
	// FlushGlobal: visible to every reader of the peer's memory, CPUs
	// included, before the flush completes.
	FlushGlobal FlushType = 1 << 0
	// FlushPersistent: also durable (written back to persistent memory),
	// so it survives the peer's power loss. Only a region of persistent
	// memory (pmem) can be registered for it.
	FlushPersistent FlushType = 1 << 1
)

// FlushLevel is how much of the region a WRFlush covers (enum
// ibv_selectivity_level).
type FlushLevel uint8

// Flush selectivity levels.
const (
	FlushRange FlushLevel = 0 // [RemoteAddr, +Imm)
	FlushMR    FlushLevel = 1 // the whole region RKey names
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
	// receiver's WC.Imm has the same value. For WRSendWithInv, the rkey of
	// the receiver's type-2 memory window to invalidate. For WRFlush of a
	// FlushRange, the range's length in bytes.
	Imm uint32
	// WRFlush: what it makes of the data, and how much it covers. These
	// fill padding: SendWR is no larger for them on 64-bit machines.
	FlushType  FlushType
	FlushLevel FlushLevel
	// RDMA, atomics and WRFlush: the remote address and key.
	RemoteAddr uint64
	RKey       uint32
	// Atomics: the compare (or add) operand, and the swap operand, which
	// is also the value a WRAtomicWrite writes.
	CompareAdd uint64
	Swap       uint64
	// UD: the destination.
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
	// WRBindMW: what to bind; WRLocalInv: Bind.MW is the window.
	Bind *MWBind
}

// MWBind is what a WRBindMW request binds (struct ibv_mw_bind with its
// ibv_mw_bind_info): Length bytes at Addr, inside MR's I/O virtual
// addresses, open to a peer through MW with the rights in Access
// (AccessRemoteRead, AccessRemoteWrite, AccessRemoteAtomic). The MR must
// have AccessMWBind, and AccessLocalWrite for a window a peer may write.
//
// Posting the request gives the window its next rkey (RKey's low 8 bits
// advance), which MW.RKey returns from then on: the key to give the peer.
// A type-2 window is bound to the QP that posts the bind, and only that
// QP's peer can use it; it must be invalidated (WRLocalInv, or the
// peer's WRSendWithInv) before it is bound again, and a bind of a window
// bound here is refused. To take a window back from a peer that may
// misbehave, Close it rather than invalidate it: see docs/MEMORY.md. A
// type-1 window is open to any QP of its PD, and a bind with a nil MR and
// Length 0 unbinds it. A bind that breaks the verbs' rules (a range
// outside the MR, rights the MR cannot back) is refused at post with
// EINVAL, before the device would fail it and move the QP to the error
// state. On mlx5 a window spans at most 2 GiB (EOPNOTSUPP past that), and
// its bind takes the send queue's room of up to three requests.
type MWBind struct {
	MW     *MW
	MR     *MR
	Addr   uint64
	Length uint64
	Access Access
}

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR struct {
	WRID uint64
	SGL  []SGE
}
