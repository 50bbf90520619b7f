package rxe

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/release"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// Offsets inside struct rxe_send_wr's union wr (rdma_user_rxe.h), which
// the generated uapi struct keeps as bytes: from the C compiler, relative
// to the start of the union.
const (
	wrRDMARemoteAddr   = uapi.OffsetRxeSendWqeRDMARemoteAddr - uapi.OffsetRxeSendWqeWRUnion
	wrRDMARKey         = uapi.OffsetRxeSendWqeRDMARKey - uapi.OffsetRxeSendWqeWRUnion
	wrAtomicRemoteAddr = uapi.OffsetRxeSendWqeAtomicRemoteAddr - uapi.OffsetRxeSendWqeWRUnion
	wrAtomicCompareAdd = uapi.OffsetRxeSendWqeAtomicCompareAdd - uapi.OffsetRxeSendWqeWRUnion
	wrAtomicSwap       = uapi.OffsetRxeSendWqeAtomicSwap - uapi.OffsetRxeSendWqeWRUnion
	wrAtomicRKey       = uapi.OffsetRxeSendWqeAtomicRKey - uapi.OffsetRxeSendWqeWRUnion
	wrUDRemoteQPN      = uapi.OffsetRxeSendWqeUDRemoteQPN - uapi.OffsetRxeSendWqeWRUnion
	wrUDRemoteQKey     = uapi.OffsetRxeSendWqeUDRemoteQKey - uapi.OffsetRxeSendWqeWRUnion
	wrUDPKeyIndex      = uapi.OffsetRxeSendWqeUDPKeyIndex - uapi.OffsetRxeSendWqeWRUnion
	wrUDAHNum          = uapi.OffsetRxeSendWqeUDAHNum - uapi.OffsetRxeSendWqeWRUnion
	wrMWAddr           = uapi.OffsetRxeSendWqeMWAddr - uapi.OffsetRxeSendWqeWRUnion
	wrMWLength         = uapi.OffsetRxeSendWqeMWLength - uapi.OffsetRxeSendWqeWRUnion
	wrMWMRLKey         = uapi.OffsetRxeSendWqeMWMRLKey - uapi.OffsetRxeSendWqeWRUnion
	wrMWRKey           = uapi.OffsetRxeSendWqeMWRKey - uapi.OffsetRxeSendWqeWRUnion
	wrMWNewRKey        = uapi.OffsetRxeSendWqeMWNewRKey - uapi.OffsetRxeSendWqeWRUnion
	wrMWAccess         = uapi.OffsetRxeSendWqeMWAccess - uapi.OffsetRxeSendWqeWRUnion
)

// The Go struct's union field must sit where C's union does, and the SGEs
// (or inline data) of send and receive WQEs right after the headers.
var (
	_ [0]struct{} = [unsafe.Offsetof(uapi.RxeSendWqe{}.WR) + unsafe.Offsetof(uapi.RxeSendWR{}.WR) - uapi.OffsetRxeSendWqeWRUnion]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(uapi.RxeSendWqe{}) - uapi.OffsetRxeSendWqeDmaSGE]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(uapi.RxeSendWqe{}) - uapi.OffsetRxeSendWqeDmaInlineData]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(uapi.RxeRecvWqe{}) - uapi.OffsetRxeRecvWqeDmaSGE]struct{}{}
)

const (
	sendWQEHeader = unsafe.Sizeof(uapi.RxeSendWqe{}) // 208: SGEs or inline data follow
	recvWQEHeader = unsafe.Sizeof(uapi.RxeRecvWqe{}) // 40: SGEs follow
	sgeSize       = unsafe.Sizeof(provider.SGE{})    // 16, as struct rxe_sge
)

var _ [0]struct{} = [sendWQEHeader - 208]struct{}{}
var _ [0]struct{} = [recvWQEHeader - 40]struct{}{}
var _ [0]struct{} = [unsafe.Sizeof(uapi.RxeDmaInfo{}) - 24]struct{}{} // PostRecv writes its six fields one by one
var _ [0]struct{} = [sgeSize - 16]struct{}{}

// queuePair is an rxe queue pair: a send queue of struct rxe_send_wqe and a
// receive queue of struct rxe_recv_wqe, both produced here and consumed
// by the kernel. Posting a receive needs no syscall; posting sends ends
// with the POST_SEND doorbell.
type queuePair struct {
	conn     *transport.Conn
	k        kverbs.QP
	typ      uint8
	sq, rq   *queue
	doorbell *kverbs.SendDoorbell
	ssn      uint32
	recvSGE  uint32  // the most SGEs a receive takes: the QP's cap, or what fits a slot if fewer
	sendSGE  uint32  // the same for a send
	plainOps uint32  // provider.PlainSendOps(typ)
	ext      *extOps // the context's: whether ATOMIC_WRITE and FLUSH are taken
}

// CreateQP creates the QP and maps its queues.
func (c *context) CreateQP(r kverbs.QPReq) (provider.QP, error) {
	var resp uapi.RxeCreateQPResp
	k, err := kverbs.CreateQP(c.conn, r, nil, bytesOf(&resp))
	if err != nil {
		return nil, err
	}
	q := &queuePair{conn: c.conn, k: k, typ: r.Type, doorbell: kverbs.NewSendDoorbell(k.Handle), plainOps: provider.PlainSendOps(r.Type), ext: &c.ext}
	if q.sq, err = mapQueue(c.fd, resp.SqMi, sendWQEHeader); err != nil {
		kverbs.DestroyQP(c.conn, k.Handle)
		return nil, fmt.Errorf("rxe send queue: %w", err)
	}
	q.sendSGE = min(k.Cap.MaxSendSGE, uint32((q.sq.slotSize()-sendWQEHeader)/sgeSize))
	if !r.HasSRQ {
		if q.rq, err = mapQueue(c.fd, resp.RqMi, recvWQEHeader); err != nil {
			q.sq.unmap()
			kverbs.DestroyQP(c.conn, k.Handle)
			return nil, fmt.Errorf("rxe receive queue: %w", err)
		}
		q.recvSGE = min(k.Cap.MaxRecvSGE, uint32((q.rq.slotSize()-recvWQEHeader)/sgeSize))
	}
	return q, nil
}

// Handle returns the kernel handle.
func (q *queuePair) Handle() uint32 { return q.k.Handle }

// QPN returns the QP number.
func (q *queuePair) QPN() uint32 { return q.k.QPN }

// Cap returns the queue sizes the kernel made.
func (q *queuePair) Cap() kverbs.QPCap { return q.k.Cap }

func wrErr(i int, err error) error { return fmt.Errorf("work request %d: %w", i, err) }

// PostSend writes each request into the send queue, then rings the
// doorbell once for the batch. A doorbell that fails leaves the requests
// written, counted in n (doorbellErr).
//
// One request, the latency tools' case, has a path of its own that keeps
// no loop state across the calls.
func (q *queuePair) PostSend(wrs []provider.SendWR) (int, error) {
	if len(wrs) == 1 {
		quick, err := q.postOneSend(&wrs[0])
		if err != nil {
			return 0, wrErr(0, err)
		}
		// rxe sends the queue's requests inside the doorbell's write,
		// which lasts as long as they take. Ring goes through Syscall, so
		// the runtime can take the P from a write that outlasts the
		// monitor's tick and stop the world without waiting for it, at
		// the price of the scheduler's entry and exit. A lone request of
		// at most quickDoorbellBytes on an empty queue (quick) keeps the
		// write short, well under the tick: its doorbell goes through
		// RawSyscall (RingQuick), which keeps the P and skips that
		// price. A batch, a larger request, or a queue still holding
		// requests rings through Syscall.
		if quick {
			err = q.doorbell.RingQuick(q.conn)
		} else {
			err = q.doorbell.Ring(q.conn)
		}
		if err != nil {
			return 1, doorbellErr(1, err)
		}
		return 1, nil
	}
	var n int
	var err error
	for n = 0; n < len(wrs); n++ {
		if _, err = q.postOneSend(&wrs[n]); err != nil {
			err = wrErr(n, err)
			break
		}
	}
	if n > 0 {
		if derr := q.doorbell.Ring(q.conn); derr != nil && err == nil {
			err = doorbellErr(n, derr)
		}
	}
	return n, err
}

// doorbellErr is the error of a doorbell that failed after n requests
// were written. They stay in the send queue, as in rdma-core's
// rxe_post_send: the producer index already names them, and the kernel
// may have read it, so they cannot be taken back. A later doorbell, or
// the kernel's own run of the queue, sends them.
func doorbellErr(n int, err error) error {
	which, it := "work request 0", "it"
	if n > 1 {
		which, it = "work requests 0 to "+strconv.Itoa(n-1), "them"
	}
	return fmt.Errorf("send doorbell after %s: %w (posted: a later doorbell sends %s; do not post %s again)", which, err, it, it)
}

// quickDoorbellBytes is the most a lone request on an empty send queue
// may carry for PostSend to ring its doorbell through RawSyscall: the
// kernel's work for it stays a few microseconds, under the runtime
// monitor's tick.
const quickDoorbellBytes = 1024

// postOneSend writes one request into the send queue and publishes it.
// quick says that the queue held no other request (every earlier one is
// complete: the kernel's doorbell work is this request's alone) and that
// the request carries at most quickDoorbellBytes.
//
// A plain request (an opcode of provider.PlainSendOps for the QP's type,
// no inline data, at most sendSGE SGEs) is checked here, in three
// compares and the length's after the SGEs are written; anything else
// goes through checkSend first, which keeps provider.CheckSend's general
// checks off the common request.
func (q *queuePair) postOneSend(wr *provider.SendWR) (quick bool, err error) {
	sq := q.sq
	var length uint64
	var ahNum uint32
	plain := q.plainOps>>wr.Opcode&1 != 0 && // an opcode of 32 or more shifts to 0
		wr.Flags&provider.SendInline == 0 && uint32(len(wr.SGL)) <= q.sendSGE
	if !plain {
		if length, ahNum, err = q.checkSend(wr); err != nil {
			return false, err
		}
		if wr.Opcode >= provider.WRFlush { // FLUSH or ATOMIC_WRITE: checkSend takes no other opcode past 9
			return q.postRemoteOp(wr, length)
		}
	}
	prod := sq.prod.Load() // ours
	cons := sq.cons.Load()
	if (prod+1)&sq.mask == cons {
		return false, fmt.Errorf("send queue full (%d entries): %w", sq.size(), unix.ENOMEM)
	}
	slot := sq.slot(prod)
	// The header is cleared in two halves: the compiler unrolls each
	// into seven stores, where a clear of the whole 208 bytes is a loop
	// (and unsafe.Slice's overflow checks).
	h := (*[2][sendWQEHeader / 2]byte)(slot)
	h[0] = [sendWQEHeader / 2]byte{}
	h[1] = [sendWQEHeader / 2]byte{}
	w := (*uapi.RxeSendWqe)(slot)
	w.WR.WRID = wr.WRID
	w.WR.Opcode = wr.Opcode
	w.WR.SendFlags = wr.Flags
	u := w.WR.WR[:]
	ne := binary.NativeEndian
	switch wr.Opcode {
	case provider.WRSendWithImm, provider.WRRDMAWriteWithImm:
		binary.BigEndian.PutUint32(w.WR.Ex[:], wr.Imm) // __be32 imm_data
	case provider.WRSendWithInv:
		ne.PutUint32(w.WR.Ex[:], wr.Imm) // invalidate_rkey
	}
	switch wr.Opcode {
	case provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRRDMARead:
		ne.PutUint64(u[wrRDMARemoteAddr:], wr.RemoteAddr)
		ne.PutUint32(u[wrRDMARKey:], wr.RKey)
		w.Iova = wr.RemoteAddr
	case provider.WRAtomicCmpSwp, provider.WRAtomicFetchAdd:
		ne.PutUint64(u[wrAtomicRemoteAddr:], wr.RemoteAddr)
		ne.PutUint64(u[wrAtomicCompareAdd:], wr.CompareAdd)
		ne.PutUint64(u[wrAtomicSwap:], wr.Swap)
		ne.PutUint32(u[wrAtomicRKey:], wr.RKey)
		w.Iova = wr.RemoteAddr
	case provider.WRBindMW, provider.WRLocalInv:
		putWindowOp(w, wr)
	}
	if q.typ == uapi.IB_UVERBS_QPT_UD {
		ne.PutUint32(u[wrUDRemoteQPN:], wr.RemoteQPN)
		ne.PutUint32(u[wrUDRemoteQKey:], wr.RemoteQKey)
		ne.PutUint16(u[wrUDPKeyIndex:], 0)
		ne.PutUint32(u[wrUDAHNum:], ahNum)
	}
	data := unsafe.Add(slot, sendWQEHeader)
	if wr.Flags&provider.SendInline != 0 {
		dst := unsafe.Slice((*byte)(data), length)
		off := 0
		for _, s := range wr.SGL {
			off += copy(dst[off:], provider.UserBytes(s.Addr, s.Length))
		}
	} else {
		length = putSGL(data, wr.SGL)
		if length > provider.MaxSendLength { // the slot is not published
			return false, fmt.Errorf("%d bytes: %w", length, unix.EINVAL)
		}
		w.Dma.NumSGE = uint32(len(wr.SGL))
	}
	w.Dma.Length = uint32(length)
	w.Dma.Resid = uint32(length)
	q.ssn++
	w.Ssn = q.ssn
	release.Store32(sq.prod, (prod+1)&sq.mask) // the WQE is complete
	return prod == cons && length <= quickDoorbellBytes, nil
}

// putWindowOp writes a bind's or a local invalidation's fields (checkSend
// checked wr.Bind) and moves its window to the state the request leaves
// it in: nothing fails between here and the WQE's publication. It stays
// out of postOneSend, whose common requests would otherwise pay for its
// registers.
//
//go:noinline
func putWindowOp(w *uapi.RxeSendWqe, wr *provider.SendWR) {
	ne := binary.NativeEndian
	mw := wr.Bind.MW
	cur := mw.RKey.Load()
	if wr.Opcode == provider.WRLocalInv {
		ne.PutUint32(w.WR.Ex[:], cur) // invalidate_rkey
		mw.Bound.Store(false)
		return
	}
	b, u := wr.Bind, w.WR.WR[:]
	next := provider.NextRKey(cur)
	ne.PutUint64(u[wrMWAddr:], b.Addr)
	ne.PutUint64(u[wrMWLength:], b.Length)
	if b.MR != nil {
		ne.PutUint32(u[wrMWMRLKey:], b.MR.LKey)
	}
	ne.PutUint32(u[wrMWRKey:], cur)
	ne.PutUint32(u[wrMWNewRKey:], next)
	ne.PutUint32(u[wrMWAccess:], b.Access)
	mw.RKey.Store(next)
	mw.Bound.Store(mw.Type == 2)
}

// checkSend checks a request that is not plain (see postOneSend): that
// the device takes it if it is an ATOMIC_WRITE or a FLUSH, the rules all
// providers share, then that it fits a send slot, and a UD request's
// address handle. It returns the request's length and the handle's
// index.
func (q *queuePair) checkSend(wr *provider.SendWR) (length uint64, ahNum uint32, err error) {
	if wr.Opcode == provider.WRAtomicWrite || wr.Opcode == provider.WRFlush {
		if err := q.ext.check(wr); err != nil { // first: on 6.1 the opcode is what is wrong
			return 0, 0, err
		}
	}
	length, err = provider.CheckSend(wr, q.typ, q.k.Cap.MaxSendSGE, q.k.Cap.MaxInlineData)
	if err != nil {
		return 0, 0, err
	}
	inline := wr.Flags&provider.SendInline != 0
	switch {
	case inline && sendWQEHeader+uintptr(length) > q.sq.slotSize():
		return 0, 0, fmt.Errorf("%d bytes inline do not fit a send slot: %w", length, unix.EINVAL)
	case !inline && sendWQEHeader+uintptr(len(wr.SGL))*sgeSize > q.sq.slotSize():
		return 0, 0, fmt.Errorf("%d SGEs do not fit a send slot: %w", len(wr.SGL), unix.EINVAL)
	}
	if q.typ == uapi.IB_UVERBS_QPT_UD {
		var ah *addressHandle
		if wr.AH != nil {
			ah, _ = wr.AH.AH.(*addressHandle)
		}
		if ah == nil {
			return 0, 0, fmt.Errorf("a UD send needs an address handle of this device: %w", unix.EINVAL)
		}
		if ah.num == 0 {
			return 0, 0, errs.NewUnsupported("rxe address handle index (ah_num)", "5.17", unix.EOPNOTSUPP)
		}
		ahNum = ah.num
	}
	return length, ahNum, nil
}

// PostRecv writes each request into the receive queue; the kernel takes
// them as packets arrive, so no syscall is needed.
//
// Its loop is its own, and sharedRecvQueue.PostRecv has a copy: a loop shared
// through a function, with the errors made by another, adds a call and
// its spills to each receive, and the WQE's writing does not fit the
// inliner's budget.
func (q *queuePair) PostRecv(wrs []provider.RecvWR) (int, error) {
	rq := q.rq
	if rq == nil {
		return 0, fmt.Errorf("the QP receives through an SRQ: %w", unix.EINVAL)
	}
	for i := range wrs {
		wr := &wrs[i]
		if uint32(len(wr.SGL)) > q.recvSGE { // one compare for the QP's cap and the slot's room
			return i, wrErr(i, q.recvSGEErr(len(wr.SGL)))
		}
		prod := rq.prod.Load()
		if (prod+1)&rq.mask == rq.cons.Load() {
			return i, wrErr(i, fmt.Errorf("receive queue full (%d entries): %w", rq.size(), unix.ENOMEM))
		}
		slot := rq.slot(prod)
		// The SGEs go first: their lengths' sum goes into the header. A
		// lone SGE, the common receive, is copied whole, without putSGL's
		// loop.
		var length uint32 // modulo 2^32, as C's u32
		if len(wr.SGL) == 1 {
			sge := (*provider.SGE)(unsafe.Pointer(unsafe.SliceData(wr.SGL)))
			*(*provider.SGE)(unsafe.Add(slot, recvWQEHeader)) = *sge
			length = sge.Length
		} else {
			length = uint32(putSGL(unsafe.Add(slot, recvWQEHeader), wr.SGL))
		}
		w := (*uapi.RxeRecvWqe)(slot)
		w.WRID, w.Reserved, w.Padding = wr.WRID, 0, 0
		w.Dma.Length, w.Dma.Resid, w.Dma.CurSGE = length, length, 0
		w.Dma.NumSGE, w.Dma.SGEOffset, w.Dma.Reserved = uint32(len(wr.SGL)), 0, 0
		release.Store32(rq.prod, (prod+1)&rq.mask)
	}
	return len(wrs), nil
}

// recvSGEErr says why a receive of n SGEs, more than q.recvSGE, is refused.
func (q *queuePair) recvSGEErr(n int) error {
	if uint32(n) > q.k.Cap.MaxRecvSGE {
		return fmt.Errorf("%d SGEs, the QP takes %d: %w", n, q.k.Cap.MaxRecvSGE, unix.EINVAL)
	}
	return fmt.Errorf("%d SGEs do not fit a receive slot: %w", n, unix.EINVAL)
}

// putSGL writes sgl at dst (struct rxe_sge[]) field by field, and returns
// the sum of its lengths (in 64 bits: a send checks it against 2 GiB, a
// receive keeps it modulo 2^32, as C's): a copy() calls memmove, dearer
// than these stores for the one or two SGEs a request carries, and a
// second loop for the sum would cost its own compares and loads.
//
// It addresses each entry from dst rather than making a slice of it:
// unsafe.Slice checks the length's product and the end's address for
// overflow, checks the callers have already made against the slot.
func putSGL(dst unsafe.Pointer, sgl []provider.SGE) (length uint64) {
	if len(sgl) == 0 {
		return 0
	}
	src := unsafe.Pointer(unsafe.SliceData(sgl))
	for n := len(sgl); ; {
		d, s := (*provider.SGE)(dst), (*provider.SGE)(src)
		d.Addr, d.Length, d.LKey = s.Addr, s.Length, s.LKey
		length += uint64(s.Length)
		if n--; n == 0 {
			return length
		}
		dst, src = unsafe.Add(dst, sgeSize), unsafe.Add(src, sgeSize)
	}
}

// Destroy destroys the QP in the kernel, then unmaps its queues.
func (q *queuePair) Destroy() (uint32, error) {
	ev, err := kverbs.DestroyQP(q.conn, q.k.Handle)
	if err != nil {
		return ev, err
	}
	q.Release()
	return ev, nil
}

// Release unmaps the queues.
func (q *queuePair) Release() {
	q.sq.unmap()
	if q.rq != nil {
		q.rq.unmap()
	}
}
