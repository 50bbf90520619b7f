package mlx5model

import (
	"unsafe"

	"github.com/goverbs/goverbs/uapi"
)

// The device's ring formats, as byte offsets into the generated mirrors of
// mlx5dv.h (uapi/zmlx5dv.go): the model reads and writes them big-endian
// at these offsets, never through a typed pointer. They come from the
// mirrors, not from the provider's own table, so the two are checked
// against each other by every test that runs the provider on the model.
const (
	cqeSize = int(unsafe.Sizeof(uapi.Mlx5CQE64{})) // 64

	cqeMLPath       = unsafe.Offsetof(uapi.Mlx5CQE64{}.MlPath)
	cqeFlagsRQPN    = unsafe.Offsetof(uapi.Mlx5CQE64{}.FlagsRqpn)
	cqeSRQNUIdx     = unsafe.Offsetof(uapi.Mlx5CQE64{}.SrqnUIDX)
	cqeImmInvalPKey = unsafe.Offsetof(uapi.Mlx5CQE64{}.ImmInvalPkey)
	cqeByteCnt      = unsafe.Offsetof(uapi.Mlx5CQE64{}.ByteCnt)
	cqeTimestamp    = unsafe.Offsetof(uapi.Mlx5CQE64{}.Timestamp)
	cqeSopDropQPN   = unsafe.Offsetof(uapi.Mlx5CQE64{}.SopDropQPN)
	cqeWQECounter   = unsafe.Offsetof(uapi.Mlx5CQE64{}.WqeCounter)
	cqeSignature    = unsafe.Offsetof(uapi.Mlx5CQE64{}.Signature)
	cqeOpOwn        = unsafe.Offsetof(uapi.Mlx5CQE64{}.OpOwn)

	errCQEVendorSynd = unsafe.Offsetof(uapi.Mlx5ErrCQE{}.VendorErrSynd)
	errCQESyndrome   = unsafe.Offsetof(uapi.Mlx5ErrCQE{}.Syndrome)
	errCQEOpcodeQPN  = unsafe.Offsetof(uapi.Mlx5ErrCQE{}.SWqeOpcodeQPN)
	errCQESRQN       = unsafe.Offsetof(uapi.Mlx5ErrCQE{}.Srqn)

	// cqeLastWord is where the 4-byte word that holds op_own starts
	// (wqe_counter, signature, op_own): the model stores it last, with
	// one release store, so a poller that sees the owner bit sees the rest.
	cqeLastWord = cqeWQECounter

	ctrlOpmodIdxOpcode = unsafe.Offsetof(uapi.Mlx5WqeCtrlSeg{}.OpmodIdxOpcode)
	ctrlQPNDS          = unsafe.Offsetof(uapi.Mlx5WqeCtrlSeg{}.QPNDs)
	ctrlFMCESE         = unsafe.Offsetof(uapi.Mlx5WqeCtrlSeg{}.FmCeSe)
	ctrlImm            = unsafe.Offsetof(uapi.Mlx5WqeCtrlSeg{}.Imm)
	ctrlSize           = int(unsafe.Sizeof(uapi.Mlx5WqeCtrlSeg{}))

	raddrAddr = unsafe.Offsetof(uapi.Mlx5WqeRaddrSeg{}.Raddr)
	raddrRKey = unsafe.Offsetof(uapi.Mlx5WqeRaddrSeg{}.Rkey)
	raddrSize = int(unsafe.Sizeof(uapi.Mlx5WqeRaddrSeg{}))

	atomicSwapAdd = unsafe.Offsetof(uapi.Mlx5WqeAtomicSeg{}.SwapAdd)
	atomicCompare = unsafe.Offsetof(uapi.Mlx5WqeAtomicSeg{}.Compare)
	atomicSize    = int(unsafe.Sizeof(uapi.Mlx5WqeAtomicSeg{}))

	avQKey     = uapi.OffsetMlx5WqeAvQkey
	avDQPDCT   = unsafe.Offsetof(uapi.Mlx5WqeAv{}.DqpDct)
	avRMAC     = unsafe.Offsetof(uapi.Mlx5WqeAv{}.Rmac)
	avGrhGIDFl = unsafe.Offsetof(uapi.Mlx5WqeAv{}.GrhGIDFl)
	avRGID     = unsafe.Offsetof(uapi.Mlx5WqeAv{}.Rgid)
	avHopLimit = unsafe.Offsetof(uapi.Mlx5WqeAv{}.HopLimit)
	avSize     = int(unsafe.Sizeof(uapi.Mlx5WqeDatagramSeg{}))

	dataByteCount = unsafe.Offsetof(uapi.Mlx5WqeDataSeg{}.ByteCount)
	dataLKey      = unsafe.Offsetof(uapi.Mlx5WqeDataSeg{}.Lkey)
	dataAddr      = unsafe.Offsetof(uapi.Mlx5WqeDataSeg{}.Addr)
	dataSegSize   = int(unsafe.Sizeof(uapi.Mlx5WqeDataSeg{}))

	wqeBB = uapi.MLX5_SEND_WQE_BB // 64-byte send WQE basic block
)

// UAR page layout (4 KiB UARs).
const (
	uarPageSize  = 4096
	uarCQDoorbel = uapi.MLX5_CQ_DOORBELL // CQ arm doorbell: 8 bytes
	uarBFOffset  = 0x800                 // first blue-flame register (MLX5_BF_OFFSET)
	bfRegSize    = 512                   // the bf_reg_size GET_CONTEXT answers
	bfRegsPerUAR = 2                     // MLX5_NON_FP_BFREGS_PER_UAR
	bfHalf       = bfRegSize / 2         // one half of a register: a blue-flame buffer (rdma-core's bf->buf_size)
)

// uarSendSlots are the 8-byte places a send doorbell may land in a UAR
// page: each blue-flame register, alternating between its halves.
var uarSendSlots = [...]uintptr{0x800, 0x900, 0xa00, 0xb00}

// Vendor syndromes the model writes into error CQEs (vendor_err_synd);
// the device's real values are undocumented, these are the model's own.
const (
	vendorFlush   = 0xf9
	vendorDefault = 0x68
)
