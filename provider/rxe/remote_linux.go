package rxe

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/release"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// Offsets inside struct rxe_send_wr's union wr of the FLUSH fields, which
// Linux 6.2 added (uapi's kernel62.go).
const (
	wrFlushRemoteAddr = uapi.OffsetRxeSendWqeFlushRemoteAddr - uapi.OffsetRxeSendWqeWRUnion
	wrFlushLength     = uapi.OffsetRxeSendWqeFlushLength - uapi.OffsetRxeSendWqeWRUnion
	wrFlushRKey       = uapi.OffsetRxeSendWqeFlushRKey - uapi.OffsetRxeSendWqeWRUnion
	wrFlushType       = uapi.OffsetRxeSendWqeFlushType - uapi.OffsetRxeSendWqeWRUnion
	wrFlushLevel      = uapi.OffsetRxeSendWqeFlushLevel - uapi.OffsetRxeSendWqeWRUnion
)

// remoteCaps are the capabilities that say a device takes ATOMIC_WRITE
// and FLUSH requests; extProbed marks the answer as known (bit 0 is none
// of them).
const (
	remoteCaps = uapi.IB_UVERBS_DEVICE_ATOMIC_WRITE | uapi.IB_UVERBS_DEVICE_FLUSH_GLOBAL | uapi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT
	extProbed  = 1
)

// extOps knows, for a context, whether its device takes the send opcodes
// Linux 6.2 gave rxe: ATOMIC_WRITE and FLUSH. The device's capabilities
// say so, which the first such request asks the kernel for, and every
// later one reads: a probe, not the kernel's version.
type extOps struct {
	conn *transport.Conn
	caps atomic.Uint64 // remoteCaps' bits the device has, with extProbed; 0 until asked
}

// check returns nil if the device takes wr (an ATOMIC_WRITE or a FLUSH),
// else an error wrapping ErrNotSupported that names the kernel with it.
// A query that fails is returned as it is and asked again next time.
func (e *extOps) check(wr *provider.SendWR) error {
	caps := e.caps.Load()
	if caps == 0 {
		r, err := kverbs.QueryDevice(e.conn)
		if err != nil {
			return fmt.Errorf("query device for its atomic write and flush capabilities: %w", err)
		}
		caps = r.DeviceCapFlagsEx&remoteCaps | extProbed
		e.caps.Store(caps)
	}
	var need uint64
	name := "rxe atomic write"
	if wr.Opcode == provider.WRAtomicWrite {
		need = uapi.IB_UVERBS_DEVICE_ATOMIC_WRITE
	} else {
		name = "rxe flush"
		if wr.FlushType&provider.FlushGlobal != 0 {
			need |= uapi.IB_UVERBS_DEVICE_FLUSH_GLOBAL
		}
		if wr.FlushType&provider.FlushPersistent != 0 {
			need |= uapi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT
		}
	}
	if caps&need != need {
		return errs.NewUnsupported(name, "6.2", unix.EOPNOTSUPP)
	}
	return nil
}

// postRemoteOp writes an ATOMIC_WRITE's or a FLUSH's WQE, which checkSend
// checked, as rdma-core's rxe provider lays them out (wr_atomic_write,
// v44; wr_flush, v45): an atomic write's address and key where an RDMA
// write's go, its 8 bytes in dma.atomic_wr (Swap, in host order: the
// kernel copies the bytes into the packet and the responder stores them
// as they come, so a peer of the same byte order reads Swap back), and 8
// as its length; a flush's fields in wr.flush, with its range's length
// in dma. It returns what postOneSend does. It is a writer of its own,
// out of line, so that postOneSend's common requests pay nothing for it.
//
//go:noinline
func (q *queuePair) postRemoteOp(wr *provider.SendWR, length uint64) (quick bool, err error) {
	sq := q.sq
	if wr.Opcode == provider.WRAtomicWrite && sendWQEHeader+8 > sq.slotSize() {
		return false, fmt.Errorf("atomic write's 8 bytes do not fit a send slot: %w", unix.EINVAL)
	}
	prod := sq.prod.Load() // ours
	cons := sq.cons.Load()
	if (prod+1)&sq.mask == cons {
		return false, fmt.Errorf("send queue full (%d entries): %w", sq.size(), unix.ENOMEM)
	}
	slot := sq.slot(prod)
	*(*[sendWQEHeader]byte)(slot) = [sendWQEHeader]byte{}
	w := (*uapi.RxeSendWqe)(slot)
	w.WR.WRID = wr.WRID
	w.WR.Opcode = wr.Opcode
	w.WR.SendFlags = wr.Flags
	u := w.WR.WR[:]
	ne := binary.NativeEndian
	if wr.Opcode == provider.WRAtomicWrite {
		ne.PutUint64(u[wrRDMARemoteAddr:], wr.RemoteAddr)
		ne.PutUint32(u[wrRDMARKey:], wr.RKey)
		*(*uint64)(unsafe.Add(slot, uapi.OffsetRxeSendWqeDmaAtomicWR)) = wr.Swap // 8-aligned: 208 into the slot
	} else {
		ne.PutUint64(u[wrFlushRemoteAddr:], wr.RemoteAddr)
		ne.PutUint32(u[wrFlushLength:], uint32(length))
		ne.PutUint32(u[wrFlushRKey:], wr.RKey)
		u[wrFlushType] = wr.FlushType
		u[wrFlushLevel] = wr.FlushLevel
	}
	w.Iova = wr.RemoteAddr
	w.Dma.Length = uint32(length)
	w.Dma.Resid = uint32(length)
	q.ssn++
	w.Ssn = q.ssn
	release.Store32(sq.prod, (prod+1)&sq.mask) // the WQE is complete
	// Neither carries more than 8 bytes of payload: a flush's length is
	// the responder's range, not data sent.
	return prod == cons, nil
}
