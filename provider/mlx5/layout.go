package mlx5

// The device's ring layouts (rdma-core's mlx5dv.h and the PRM): byte
// offsets and values. Every multi-byte field is big-endian on the device,
// whatever the host. The layout tests hold these to the C headers.

// struct mlx5_cqe64: 64 bytes; a 128-byte CQE is 64 bytes of padding (or
// inline data) followed by this.
const (
	cqeSize64        = 64
	cqeMLPath        = 17 // u8: dlid path bits in the low 7
	cqeSLID          = 22 // be16
	cqeFlagsRQPN     = 24 // be32: src QP (low 24), SL (bits 24-27), GRH (bits 28-29)
	cqeSRQNUIdx      = 32 // be32: SRQN or user index (low 24)
	cqeImmInvalPKey  = 36 // be32: immediate, invalidated rkey or pkey index
	cqeByteCnt       = 44 // be32
	cqeTimestamp     = 48 // be64: device clock ticks, or (real-time mode) seconds above nanoseconds
	cqeVendorErrSynd = 54 // u8, error CQE
	cqeSyndrome      = 55 // u8, error CQE
	cqeSopDropQPN    = 56 // be32: QPN (low 24); requester: WQE opcode (top 8)
	cqeWQECounter    = 60 // be16
	cqeOpOwn         = 63 // u8: owner bit 0, solicited bit 1, format bits 2-3, opcode bits 4-7
)

// op_own bits.
const (
	cqeOwnerMask     = 0x01
	cqeSolicitedMask = 0x02
	cqeFormatShift   = 2
	cqeFormatMask    = 0x03
	cqeOpcodeShift   = 4
)

// CQE opcodes (op_own >> 4).
const (
	cqeReq         = 0
	cqeRespWRImm   = 1
	cqeRespSend    = 2
	cqeRespSendImm = 3
	cqeRespSendInv = 4
	cqeResizeCQ    = 5
	cqeNoPacket    = 6
	cqeSigErr      = 12
	cqeReqErr      = 13
	cqeRespErr     = 14
	cqeInvalid     = 15
)

// Error CQE syndromes.
const (
	syndLocalLength        = 0x01
	syndLocalQPOp          = 0x02
	syndLocalProt          = 0x04
	syndWRFlush            = 0x05
	syndMWBind             = 0x06
	syndBadResp            = 0x10
	syndLocalAccess        = 0x11
	syndRemoteInvalidReq   = 0x12
	syndRemoteAccess       = 0x13
	syndRemoteOp           = 0x14
	syndTransportRetryExc  = 0x15
	syndRNRRetryExc        = 0x16
	syndRemoteAbortedError = 0x22
)

// Send WQE opcodes (the ctrl segment's low byte; the requester CQE's top
// byte of sop_drop_qpn).
const (
	opNop          = 0x00
	opSendInval    = 0x01
	opRDMAWrite    = 0x08
	opRDMAWriteImm = 0x09
	opSend         = 0x0a
	opSendImm      = 0x0b
	opRDMARead     = 0x10
	opAtomicCS     = 0x11
	opAtomicFA     = 0x12
	opUMR          = 0x25 // binds and invalidations of memory windows
)

// Send WQE: 64-byte basic blocks of 16-byte segments.
const (
	sendWQEBB   = 64
	sendWQEBBLg = 6
	segSize     = 16

	// struct mlx5_wqe_ctrl_seg
	ctrlOpmodIdxOpcode = 0  // be32: opmod<<24 | wqe index<<8 | opcode
	ctrlQPNDS          = 4  // be32: qpn<<8 | size in 16-byte units
	ctrlSignature      = 8  // u8
	ctrlFMCESE         = 11 // u8: fence, completion and solicited bits
	ctrlImm            = 12 // be32
	ctrlSize           = 16

	ctrlCQUpdate   = 0x08
	ctrlSolicited  = 0x02
	ctrlSmallFence = 0x20 // waits for the WQE before (a UMR) to finish locally
	ctrlFence      = 0x80

	// struct mlx5_wqe_raddr_seg
	raddrAddr = 0 // be64
	raddrRKey = 8 // be32
	raddrSize = 16

	// struct mlx5_wqe_atomic_seg
	atomicSwapAdd = 0 // be64
	atomicCompare = 8 // be64
	atomicSize    = 16

	// struct mlx5_wqe_data_seg
	dataByteCount = 0 // be32
	dataLKey      = 4 // be32
	dataAddr      = 8 // be64
	dataSize      = 16

	// struct mlx5_wqe_inl_data_seg: a be32 byte count with inlineSeg set,
	// then the data, the whole padded to 16 bytes.
	inlineHeader = 4
	inlineSeg    = 0x80000000

	// struct mlx5_wqe_av (the datagram segment of a UD WQE), 48 bytes
	avQKey       = 0  // be32
	avDQPDCT     = 8  // be32: remote QPN | extendedUDAV
	avStatRateSL = 12 // u8
	avFLMLID     = 13 // u8
	avRLID       = 14 // be16
	avRMAC       = 20 // 6 bytes
	avTClass     = 26 // u8
	avHopLimit   = 27 // u8
	avGRHGIDFL   = 28 // be32
	avRGID       = 32 // 16 bytes
	avSize       = 48

	extendedUDAV = 0x80000000

	// struct mlx5_wqe_umr_ctrl_seg: what a UMR WQE changes in the mkey
	// (a memory window) the ctrl segment's immediate names.
	umrFlags        = 0  // u8
	umrKLMOctowords = 4  // be16: translation entries that follow, in 16-byte units
	umrMkeyMask     = 8  // be64: which fields of the mkey context to take
	umrCtrlSize     = 48 // then the mkey context

	umrFlagCheckQPN     = 0x08
	umrFlagTransOffset  = 0x10
	umrFlagCheckFree    = 0x20
	umrFlagInline       = 0x80
	umrMaskLen          = 1 << 0
	umrMaskStartAddr    = 1 << 6
	umrMaskMkey         = 1 << 13
	umrMaskQPN          = 1 << 14
	umrMaskLocalWrite   = 1 << 18
	umrMaskRemoteRead   = 1 << 19
	umrMaskRemoteWrite  = 1 << 20
	umrMaskAtomic       = 1 << 21
	umrMaskFree         = 1 << 29
	umrKLMOctowordsBind = 4 // one KLM entry, padded to 64 bytes

	// struct mlx5_wqe_mkey_context_seg: the window's new state.
	mkeyFree        = 0  // u8: mkeyFreeBit for an invalidation
	mkeyAccessFlags = 2  // u8
	mkeyQPNMkey     = 4  // be32: bound QPN<<8 (0xffffff for none) | the key's new low byte
	mkeyStartAddr   = 16 // be64
	mkeyLen         = 24 // be64
	mkeyCtxSize     = 64

	mkeyFreeBit          = 0x40
	mkeyAccessLocalWrite = 0x08
	mkeyAccessRemoteRead = 0x10
	mkeyAccessRemoteWrt  = 0x20
	mkeyAccessAtomic     = 0x40

	// struct mlx5_wqe_umr_klm_seg, in a 64-byte block: the window's
	// range in its MR.
	klmByteCount = 0 // be32
	klmMkey      = 4 // be32: the MR's lkey
	klmAddress   = 8 // be64
	klmBlockSize = 64

	umrBindSize = ctrlSize + umrCtrlSize + mkeyCtxSize + klmBlockSize // 192: 3 basic blocks
	umrInvSize  = ctrlSize + umrCtrlSize + mkeyCtxSize                // 128: 2

	invalidLKey = 0x100 // ends a receive WQE's scatter list
)

// Doorbells.
const (
	// The CQ doorbell record: two be32 words.
	dbrecSetCI = 0 // consumer index (low 24 bits)
	dbrecArm   = 4 // arm word: sn<<28 | cmd | ci

	// The QP doorbell record: receive counter, then send counter.
	dbrecRecv = 0
	dbrecSend = 4

	cqDoorbell     = 0x20    // offset of the CQ arm doorbell in the UAR page
	cqDBReqNot     = 0       // arm for the next completion
	cqDBReqNotSol  = 1 << 24 // arm for the next solicited (or error) completion
	bfOffset       = 0x800   // the first blue-flame register in a UAR page
	dbrecSize      = 64      // one doorbell record a cache line
	nonFPBfregsUAR = 2       // blue-flame registers per UAR page (static UARs)
)
