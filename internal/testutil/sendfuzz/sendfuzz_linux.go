package sendfuzz

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/provider"
)

// RecordSize is how many bytes of fuzz input make one request.
const RecordSize = 16

// ops are the opcodes a request may carry: every one the providers know,
// those they refuse among them, and one past them all. Those added later
// come last, so that the seeds' first bytes keep their opcodes.
var ops = []uint32{provider.WRSend, provider.WRSendWithImm, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm,
	provider.WRRDMARead, provider.WRSendWithInv, provider.WRAtomicCmpSwp, provider.WRAtomicFetchAdd,
	provider.WRLocalInv, provider.WRBindMW, 33, provider.WRFlush, provider.WRAtomicWrite}

// Batches decodes data into requests, RecordSize bytes each (a shorter
// tail is ignored), and calls post with each batch, the index of its last
// request, and whether the device then takes everything posted. A
// record's bytes:
//
//	0      the opcode, an index into every opcode (and one unknown)
//	1      the flags, low four bits: fence, signaled, solicited, inline
//	2      the SGEs, modulo 6: up to five, more than a QP takes
//	3      bit 0: the batch ends here; bit 1: the device then takes
//	       everything; the rest: the AH, an index into ahs
//	4-7    the remote address's low 32 bits
//	8-12   each SGE's length: 255 is provider.MaxSendLength, 254 eight
//	       bytes more, anything else itself
//	13     the SGEs' offset from base, and the UD destination QP
//	14, 15 the rkey, immediate, compare-add, swap and Q_Key; a flush's
//	       level (14, bit 0) and type (15, low two bits)
//
// base is where the SGEs point: inline requests copy from there, so 4 KiB
// from it must be readable. The last batch ends with the last record.
func Batches(data []byte, base uint64, ahs []*provider.AHRef, post func(last int, wrs []provider.SendWR, consume bool)) {
	var wrs []provider.SendWR
	for i, r := 0, data; len(r) >= RecordSize; i, r = i+1, r[RecordSize:] {
		wr := provider.SendWR{
			WRID:       uint64(i),
			Opcode:     ops[int(r[0])%len(ops)],
			Flags:      uint32(r[1] & 0xf),
			RemoteAddr: 0x7f00_0000_0000 | uint64(binary.LittleEndian.Uint32(r[4:])),
			RKey:       uint32(r[14]) << 8,
			Imm:        uint32(r[15]),
			CompareAdd: uint64(r[14]),
			Swap:       uint64(r[15]),
			AH:         ahs[int(r[3]>>2)%len(ahs)],
			RemoteQPN:  uint32(r[13]),
			RemoteQKey: uint32(r[15]) << 4,
			FlushType:  r[15] & 3,
			FlushLevel: r[14] & 1,
		}
		for k := range int(r[2]) % 6 {
			l := uint32(r[8+k])
			switch l {
			case 255:
				l = provider.MaxSendLength
			case 254:
				l = provider.MaxSendLength + 8
			}
			wr.SGL = append(wr.SGL, provider.SGE{Addr: base + uint64(r[13]), Length: l, LKey: uint32(k)})
		}
		wrs = append(wrs, wr)
		if r[3]&1 != 0 || len(r) < 2*RecordSize { // the batch ends here
			post(i, wrs, r[3]&2 != 0)
			wrs = nil
		}
	}
}

// SameRefusal reports whether PostSend's errors on a QP as it is (fast)
// and on one that checks every request (checked) agree. A request both
// over the length limit and facing a full queue may be refused for
// either: the checked path tests the length first, the fast paths the
// queue (they sum the lengths as they write the SGEs into a free slot).
func SameRefusal(fast, checked error) bool {
	if fmt.Sprint(fast) == fmt.Sprint(checked) {
		return true
	}
	return fast != nil && checked != nil && errors.Is(fast, unix.ENOMEM) && errors.Is(checked, unix.EINVAL) &&
		strings.HasSuffix(checked.Error(), " bytes: invalid argument")
}
