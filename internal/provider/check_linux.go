package provider

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// PlainSendOps returns, as bits (1<<opcode), the opcodes whose requests
// on a QP of type typ CheckSend takes on three conditions alone: no
// SendInline flag, at most maxSGE SGEs, and lengths that sum to at most
// MaxSendLength. A provider tests those three things on its fast path,
// with no call, and hands anything else to CheckSend (TestPlainSendOps
// holds the two to the same rules). UD has none: its requests need an address
// handle, which only the slow path looks for.
func PlainSendOps(typ uint8) uint32 {
	const common = 1<<WRRDMAWrite | 1<<WRRDMAWriteWithImm | 1<<WRSend | 1<<WRSendWithImm | 1<<WRSendWithInv
	switch typ {
	case uapi.IB_UVERBS_QPT_RC:
		return common | 1<<WRRDMARead
	case uapi.IB_UVERBS_QPT_UC:
		return common
	}
	return 0
}

// MaxSendLength is the most bytes one send request may carry (2 GiB).
const MaxSendLength = 1 << 31

// CheckSend checks a send work request against what a QP of type typ
// (IB_UVERBS_QPT_*) with the given limits takes, the rules every
// provider shares, and returns the request's length in bytes. The
// provider checks what is its own (its address handle, its slot sizes).
func CheckSend(wr *SendWR, typ uint8, maxSGE, maxInline uint32) (uint64, error) {
	if uint32(len(wr.SGL)) > maxSGE {
		return 0, fmt.Errorf("%d SGEs, the QP takes %d: %w", len(wr.SGL), maxSGE, unix.EINVAL)
	}
	var length uint64
	for _, s := range wr.SGL {
		length += uint64(s.Length)
	}
	if length > MaxSendLength {
		return 0, fmt.Errorf("%d bytes: %w", length, unix.EINVAL)
	}
	inline := wr.Flags&SendInline != 0
	if inline && length > uint64(maxInline) {
		return 0, fmt.Errorf("%d bytes inline, the QP takes %d: %w", length, maxInline, unix.EINVAL)
	}
	ud := typ == uapi.IB_UVERBS_QPT_UD
	switch wr.Opcode {
	case WRSend, WRSendWithImm:
		if ud && wr.AH == nil {
			return 0, fmt.Errorf("a UD send needs an address handle: %w", unix.EINVAL)
		}
	case WRSendWithInv, WRRDMAWrite, WRRDMAWriteWithImm:
		if ud {
			return 0, fmt.Errorf("opcode %d on a UD QP: %w", wr.Opcode, unix.EINVAL)
		}
	case WRRDMARead:
		if typ != uapi.IB_UVERBS_QPT_RC {
			return 0, fmt.Errorf("RDMA read needs an RC QP: %w", unix.EINVAL)
		}
		if inline { // the SGEs are where the data goes: there is nothing to inline
			return 0, fmt.Errorf("inline RDMA read: %w", unix.EINVAL)
		}
	case WRAtomicCmpSwp, WRAtomicFetchAdd:
		if typ != uapi.IB_UVERBS_QPT_RC {
			return 0, fmt.Errorf("atomics need an RC QP: %w", unix.EINVAL)
		}
		if length < 8 || wr.RemoteAddr&7 != 0 {
			return 0, fmt.Errorf("atomic of %d bytes at %#x: need 8 bytes, 8-aligned: %w", length, wr.RemoteAddr, unix.EINVAL)
		}
		if inline {
			return 0, fmt.Errorf("inline atomic: %w", unix.EINVAL)
		}
	case WRAtomicWrite:
		if typ != uapi.IB_UVERBS_QPT_RC {
			return 0, fmt.Errorf("atomic write needs an RC QP: %w", unix.EINVAL)
		}
		if len(wr.SGL) != 0 || inline { // the 8 bytes are Swap's, in the WQE
			return 0, fmt.Errorf("atomic write with SGEs or inline data (its 8 bytes are Swap): %w", unix.EINVAL)
		}
		if wr.RemoteAddr&7 != 0 {
			return 0, fmt.Errorf("atomic write at %#x: need 8-aligned: %w", wr.RemoteAddr, unix.EINVAL)
		}
		return 8, nil
	case WRFlush:
		if typ != uapi.IB_UVERBS_QPT_RC {
			return 0, fmt.Errorf("flush needs an RC QP: %w", unix.EINVAL)
		}
		if len(wr.SGL) != 0 || inline {
			return 0, fmt.Errorf("flush with data: %w", unix.EINVAL)
		}
		if wr.FlushType == 0 || wr.FlushType&^(FlushGlobal|FlushPersistent) != 0 {
			return 0, fmt.Errorf("flush type %#x (global %#x, persistent %#x, or both): %w", wr.FlushType, FlushGlobal, FlushPersistent, unix.EINVAL)
		}
		if wr.FlushLevel != FlushRange && wr.FlushLevel != FlushMR {
			return 0, fmt.Errorf("flush level %d (range %d, whole MR %d): %w", wr.FlushLevel, FlushRange, FlushMR, unix.EINVAL)
		}
		return uint64(wr.Imm), nil // the range's length; the responder ignores it for FlushMR
	case WRLocalInv:
		if typ != uapi.IB_UVERBS_QPT_RC {
			return 0, fmt.Errorf("local invalidate needs an RC QP: %w", unix.EINVAL)
		}
		if len(wr.SGL) != 0 || inline {
			return 0, fmt.Errorf("local invalidate with data: %w", unix.EINVAL)
		}
		if err := checkInvalidate(wr.Bind); err != nil {
			return 0, err
		}
	case WRBindMW:
		if typ != uapi.IB_UVERBS_QPT_RC && typ != uapi.IB_UVERBS_QPT_UC {
			return 0, fmt.Errorf("binding a memory window needs an RC or UC QP: %w", unix.EINVAL)
		}
		if len(wr.SGL) != 0 || inline {
			return 0, fmt.Errorf("memory window bind with data: %w", unix.EINVAL)
		}
		if err := checkBind(wr.Bind); err != nil {
			return 0, err
		}
	default:
		return 0, fmt.Errorf("opcode %d: %w", wr.Opcode, unix.EOPNOTSUPP)
	}
	return length, nil
}

// checkInvalidate checks a local invalidation: of a type-2 window, bound
// by a bind posted since its last invalidation. rxe (6.1 and 6.12, as
// mainline) dereferences a null QP when it invalidates a window that is
// not bound, and the kernel panics: refusing the request here is the
// only guard.
func checkInvalidate(b *MWBindRef) error {
	switch {
	case b == nil || b.MW == nil:
		return fmt.Errorf("local invalidate without a window: %w", unix.EINVAL)
	case b.MW.Type != 2:
		return fmt.Errorf("local invalidate of a type-%d window (type 2 only): %w", b.MW.Type, unix.EINVAL)
	case !b.MW.Bound.Load():
		return fmt.Errorf("local invalidate of a window that is not bound: %w", unix.EINVAL)
	}
	return nil
}

// Access flags a bind checks (IB_ACCESS_*).
const (
	accessLocalWrite   = 1 << 0
	accessRemoteWrite  = 1 << 1
	accessRemoteAtomic = 1 << 3
	accessMWBind       = 1 << 4
	accessZeroBased    = 1 << 5
)

// checkBind checks a bind against the rules of the verbs (IBTA
// C10-72..75, o10-36.2.2, o10-37.2.40) that the kernel would otherwise
// answer with a failed completion and the QP in the error state: an MR
// that allows binding, rights the MR can back, a range inside the MR,
// and for a type-2 window an MR and a length.
func checkBind(b *MWBindRef) error {
	switch {
	case b == nil || b.MW == nil:
		return fmt.Errorf("memory window bind without a window: %w", unix.EINVAL)
	case b.Access&accessZeroBased != 0:
		return fmt.Errorf("zero-based memory window: %w", unix.EINVAL)
	case b.MR == nil && b.Length != 0:
		return fmt.Errorf("memory window bind of %d bytes without an MR: %w", b.Length, unix.EINVAL)
	case b.MR == nil && b.MW.Type == 2:
		return fmt.Errorf("type-2 memory window bind without an MR (invalidate it instead): %w", unix.EINVAL)
	case b.MW.Type == 2 && b.MW.Bound.Load():
		return fmt.Errorf("bind of a type-2 window that is bound (invalidate it first): %w", unix.EINVAL)
	case b.MR == nil:
		return nil // a type-1 window's unbind
	case b.Length == 0 && b.MW.Type == 2:
		return fmt.Errorf("type-2 memory window bind of 0 bytes: %w", unix.EINVAL)
	case b.MR.Access&accessMWBind == 0:
		return fmt.Errorf("memory window bind to an MR registered without AccessMWBind: %w", unix.EINVAL)
	case b.Access&(accessRemoteWrite|accessRemoteAtomic) != 0 && b.MR.Access&accessLocalWrite == 0:
		return fmt.Errorf("memory window with remote write or atomic rights on an MR without AccessLocalWrite: %w", unix.EINVAL)
	case b.Addr < b.MR.IOVA || b.Length > b.MR.Length || b.Addr-b.MR.IOVA > b.MR.Length-b.Length:
		return fmt.Errorf("memory window [%#x, +%d) outside its MR [%#x, +%d): %w", b.Addr, b.Length, b.MR.IOVA, b.MR.Length, unix.EINVAL)
	}
	return nil
}
