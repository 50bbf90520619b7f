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
	default:
		return 0, fmt.Errorf("opcode %d: %w", wr.Opcode, unix.EOPNOTSUPP)
	}
	return length, nil
}
