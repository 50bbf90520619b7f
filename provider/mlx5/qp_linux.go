package mlx5

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uapi"
)

// The largest header a send WQE of each QP type needs before its data:
// ctrl + raddr + atomic for RC, ctrl + raddr for UC, ctrl + datagram for
// UD. A memory window's bind (192 bytes) or invalidation (128) may need
// more than a QP's WQE size: it then takes the room of as many WQEs as
// its basic blocks fill (postWindowOp), where rdma-core sizes every RC
// and UC WQE for a bind, tripling a small QP's ring for a rare request.
const (
	overheadRC = ctrlSize + raddrSize + atomicSize
	overheadUC = ctrlSize + raddrSize
	overheadUD = ctrlSize + avSize
)

// sendQueue is the send half of a QP's buffer: 64-byte basic blocks,
// written here, read by the device after the doorbell.
type sendQueue struct {
	mem     []byte // the ring of wqeCnt basic blocks
	wqeCnt  uint32 // basic blocks, a power of two
	maxPost uint32 // WQEs that fit at once
	curPost uint32 // basic blocks posted, free-running
	head    uint32 // WQEs posted
	// tail counts WQEs the device is done with; Poll advances it, for
	// unsignaled WQEs too (a completion frees every WQE up to its own).
	tail    atomic.Uint32
	wrid    []uint64 // by first basic block
	wqeHead []uint32 // head when the WQE at that block was posted
	umrOp   []uint8  // a UMR WQE's completion opcode (bind or invalidate), by first basic block; RC and UC
	wqeBB   uint32   // basic blocks of the largest WQE the QP was sized for
	// pub publishes wrid and wqeHead to Poll: stored after a batch is
	// written, loaded before they are read. The device orders them already
	// (the doorbell record's release store, the CQE's owner bit and the
	// read fence); this makes the order visible to Go's race detector,
	// which does not see the device model's side, so it is stored in
	// race builds only (raceBuild): elsewhere it would cost a locked
	// instruction per post for nothing.
	pub atomic.Uint32
}

// complete returns the wr_id of the WQE at wqe_counter ctr and the tail
// that frees the queue up to it, for the caller to store in s.tail (Poll
// stores it once for a run of CQEs: qpLookup.flush).
func (s *sendQueue) complete(ctr uint16) (wrid uint64, tail uint32) {
	s.pub.Load()
	idx := uint32(ctr) & (s.wqeCnt - 1)
	return s.wrid[idx], s.wqeHead[idx] + 1
}

// umrOpcode returns the completion opcode of the UMR WQE at wqe_counter
// ctr: a window's bind or invalidation.
func (s *sendQueue) umrOpcode(ctr uint16) cq.Opcode {
	s.pub.Load()
	return cq.Opcode(s.umrOp[uint32(ctr)&(s.wqeCnt-1)])
}

// recvQueue is the receive half: WQEs of 2^shift bytes, each a list of
// data segments.
type recvQueue struct {
	mem    []byte
	wqeCnt uint32
	shift  uint32
	maxGS  uint32
	head   uint32
	tail   atomic.Uint32
	wrid   []uint64
	pub    atomic.Uint32 // as sendQueue.pub
}

// completeRecv returns the wr_id of the receive WQE at ctr (of a queue
// with WQEs); the caller adds the completed receives to r.tail (Poll, once
// for a run of CQEs: qpLookup.flush).
func (r *recvQueue) completeRecv(ctr uint16) uint64 {
	r.pub.Load()
	return r.wrid[uint32(ctr)&(r.wqeCnt-1)]
}

// queuePair is an mlx5 queue pair. Posting writes WQEs into its buffer and rings
// the doorbell: the doorbell record, then (for sends) an 8-byte store of
// the last WQE's first bytes to the UAR's blue-flame register. No
// syscall.
type queuePair struct {
	ctx      *context
	k        kverbs.QP
	typ      uint8
	ud       bool
	key      uint32 // the CQEs' name for it: user index or QPN
	cap      kverbs.QPCap
	ovh      int // header bytes before the data
	sq       sendQueue
	rq       recvQueue
	srq      *sharedRecvQueue // where its receives come from, if it has no receive queue of its own
	gone     bool             // a destroyed QP's stand-in in the context's table (ghostOf)
	buf      dmaBuf
	db       unsafe.Pointer
	bf       unsafe.Pointer // the blue-flame register rung with 8 bytes
	bfWord   uint64         // the last WQE's first 8 bytes, as they lie in memory
	sigAll   bool           // every send WQE asks for a CQE
	sigFlag  uint8          // ctrlCQUpdate where sigAll
	plainOps uint32         // provider.PlainSendOps(typ)
	fastOps  uint32         // the opcodes postPlain takes: plainOps, or UD's sends
	atomics  uint32         // the opcodes postAtomics takes: RC's atomics, or none
	// fence is the fence the next WQE carries: the small fence after a
	// UMR, which the device must finish before a later request may use
	// the window. While it is pending, fastOps and atomics are empty
	// (their values wait in heldOps) so that postOneSend, which writes
	// it, takes the next request: the fast loops never test for it.
	fence   uint8
	heldOps [2]uint32
}

// CreateQP sizes and allocates the queues, then creates the QP in the
// kernel with their addresses, its user index and its UAR page.
func (c *context) CreateQP(r kverbs.QPReq) (provider.QP, error) {
	var srq *sharedRecvQueue
	want := r.Cap
	if r.HasSRQ {
		// A QP on an SRQ has no receive queue: its buffer is the send
		// queue alone, as mlx5_ib lays it out (qp_has_rq is false).
		if srq = c.srqByHandle(r.SRQ); srq == nil {
			return nil, fmt.Errorf("mlx5: SRQ handle %d is no SRQ of this context: %w", r.SRQ, unix.EINVAL)
		}
		want.MaxRecvWR, want.MaxRecvSGE = 0, 0
	}
	q, err := c.newQP(r.Type, r.SigAll, want)
	if err != nil {
		return nil, err
	}
	q.srq = srq
	req := uapi.Mlx5IBCreateQP{
		BufAddr:    uapi.NewPointer(q.buf.ptr()),
		DbAddr:     uapi.NewPointer(q.db),
		SqWqeCount: q.sq.wqeCnt,
		RqWqeCount: q.rq.wqeCnt,
		RqWqeShift: q.rq.shift,
		UIDX:       legacyUIDX,
	}
	if c.cqeVersion == 1 {
		req.UIDX = c.newUIDX()
	}
	if c.dynamic {
		req.Flags |= uapi.MLX5_QP_FLAG_UAR_PAGE_INDEX
		req.BfregIndex = c.qpUAR.pageID
	}
	var resp uapi.Mlx5IBCreateQPResp
	if q.k, err = kverbs.CreateQP(c.conn, r, bytesOf(&req), bytesOf(&resp)); err != nil {
		q.free()
		return nil, err
	}
	if err := q.findBF(resp.BfregIndex); err != nil {
		kverbs.DestroyQP(c.conn, q.k.Handle)
		q.free()
		return nil, err
	}
	q.k.Cap = q.cap
	q.key = q.k.QPN
	if c.cqeVersion == 1 {
		q.key = req.UIDX
	}
	c.setQP(q.key, q)
	return q, nil
}

// newQP sizes and allocates a QP's queues and doorbell record.
func (c *context) newQP(typ uint8, sigAll bool, want kverbs.QPCap) (*queuePair, error) {
	q := &queuePair{ctx: c, typ: typ, sigAll: sigAll, plainOps: provider.PlainSendOps(typ)}
	switch q.fastOps = q.plainOps; typ {
	case uapi.IB_UVERBS_QPT_RC:
		q.atomics = atomicOps
	case uapi.IB_UVERBS_QPT_UD:
		q.fastOps = 1<<provider.WRSend | 1<<provider.WRSendWithImm
	}
	if sigAll {
		q.sigFlag = ctrlCQUpdate
	}
	switch typ {
	case uapi.IB_UVERBS_QPT_RC:
		q.ovh = overheadRC
	case uapi.IB_UVERBS_QPT_UC:
		q.ovh = overheadUC
	case uapi.IB_UVERBS_QPT_UD:
		q.ovh, q.ud = overheadUD, true
	default:
		return nil, fmt.Errorf("mlx5: QP type %d: %w", typ, unix.EOPNOTSUPP)
	}
	if err := q.size(want, &c.resp); err != nil {
		return nil, err
	}
	rqBytes := int(q.rq.wqeCnt << q.rq.shift)
	sqBytes := int(q.sq.wqeCnt) * sendWQEBB
	var err error
	if q.buf, err = allocDMA(rqBytes + sqBytes); err != nil {
		return nil, err
	}
	q.rq.mem, q.sq.mem = q.buf[:rqBytes], q.buf[rqBytes:rqBytes+sqBytes]
	q.sq.wrid, q.sq.wqeHead = make([]uint64, q.sq.wqeCnt), make([]uint32, q.sq.wqeCnt)
	if !q.ud {
		q.sq.umrOp = make([]uint8, q.sq.wqeCnt)
	}
	q.rq.wrid = make([]uint64, q.rq.wqeCnt)
	if q.db, err = c.dbs.get(); err != nil {
		q.buf.free()
		return nil, err
	}
	return q, nil
}

// size works out the queue geometry for the capabilities asked, and what
// the QP can then do, within the device's limits.
func (q *queuePair) size(want kverbs.QPCap, dev *uapi.Mlx5IBAllocUcontextResp) error {
	if want.MaxRecvWR > 0 {
		gs := max(want.MaxRecvSGE, 1)
		stride := roundPow2(gs * dataSize)
		if dev.MaxRqDescSz != 0 && stride > uint32(dev.MaxRqDescSz) {
			return fmt.Errorf("mlx5: %d receive SGEs, the device takes %d: %w", gs, dev.MaxRqDescSz/dataSize, unix.EINVAL)
		}
		cnt := roundPow2(want.MaxRecvWR)
		if dev.MaxRecvWR != 0 && cnt > dev.MaxRecvWR {
			return fmt.Errorf("mlx5: %d receive WRs, the device takes %d: %w", want.MaxRecvWR, dev.MaxRecvWR, unix.EINVAL)
		}
		q.rq.wqeCnt, q.rq.shift, q.rq.maxGS = cnt, uint32(bits.TrailingZeros32(stride)), stride/dataSize
	}
	inl := 0
	if want.MaxInlineData > 0 {
		inl = alignUp(inlineHeader+int(want.MaxInlineData), segSize)
	}
	wqeSize := alignUp(max(q.ovh+int(max(want.MaxSendSGE, 1))*dataSize, q.ovh+inl), sendWQEBB)
	if dev.MaxSqDescSz != 0 && wqeSize > int(dev.MaxSqDescSz) {
		return fmt.Errorf("mlx5: send WQEs of %d bytes, the device takes %d: %w", wqeSize, dev.MaxSqDescSz, unix.EINVAL)
	}
	wr := max(want.MaxSendWR, 1)
	if uint64(wr)*uint64(wqeSize) > 1<<30 {
		return fmt.Errorf("mlx5: %d send WRs: %w", wr, unix.EINVAL)
	}
	cnt := roundPow2(wr*uint32(wqeSize)) / sendWQEBB
	if dev.MaxSendWqebb != 0 && cnt > dev.MaxSendWqebb {
		return fmt.Errorf("mlx5: %d send WRs of %d bytes, the device takes %d basic blocks: %w", want.MaxSendWR, wqeSize, dev.MaxSendWqebb, unix.EINVAL)
	}
	q.sq.wqeCnt, q.sq.maxPost, q.sq.wqeBB = cnt, cnt*sendWQEBB/uint32(wqeSize), uint32(wqeSize/sendWQEBB)
	q.cap = kverbs.QPCap{
		MaxSendWR:     q.sq.maxPost,
		MaxRecvWR:     q.rq.wqeCnt,
		MaxSendSGE:    uint32((wqeSize - q.ovh) / dataSize),
		MaxRecvSGE:    q.rq.maxGS,
		MaxInlineData: uint32(wqeSize - q.ovh - inlineHeader),
	}
	return nil
}

func alignUp(n, a int) int { return (n + a - 1) &^ (a - 1) }

// findBF finds the blue-flame register the QP's send doorbells go to: in
// the dynamic UAR page the QP was created on, or in the static page of
// the register the kernel picked.
func (q *queuePair) findBF(index uint32) error {
	c := q.ctx
	if c.dynamic {
		q.bf = unsafe.Add(c.qpUAR.base, bfOffset)
		return nil
	}
	page, err := c.staticPage(index / nonFPBfregsUAR)
	if err != nil {
		return err
	}
	q.bf = unsafe.Add(page, bfOffset+uintptr(index%nonFPBfregsUAR)*uintptr(c.resp.BFRegSize))
	return nil
}

// Handle returns the kernel handle.
func (q *queuePair) Handle() uint32 { return q.k.Handle }

// QPN returns the QP number.
func (q *queuePair) QPN() uint32 { return q.k.QPN }

// Cap returns what the QP's queues hold.
func (q *queuePair) Cap() kverbs.QPCap { return q.k.Cap }

// wqeOpcode maps a work request opcode to the device's.
var wqeOpcode = [32]uint8{
	provider.WRRDMAWrite:        opRDMAWrite,
	provider.WRRDMAWriteWithImm: opRDMAWriteImm,
	provider.WRSend:             opSend,
	provider.WRSendWithImm:      opSendImm,
	provider.WRRDMARead:         opRDMARead,
	provider.WRAtomicCmpSwp:     opAtomicCS,
	provider.WRAtomicFetchAdd:   opAtomicFA,
	provider.WRLocalInv:         opUMR,
	provider.WRBindMW:           opUMR,
	provider.WRSendWithInv:      opSendInval,
}

// PostSend writes each request into the send queue, then rings the
// doorbell once for the batch. postPlain writes the plain requests
// (inline ones among them) and postAtomics the atomics, in runs;
// postOneSend each of the others: a WQE that would pass the ring's end,
// and what it refuses. The two fast loops stay beside the general writer
// because they are faster on a real CPU (BenchmarkMlx5PostSend*, in
// docs/PERFORMANCE.md), by the most for atomics.
func (q *queuePair) PostSend(wrs []provider.SendWR) (int, error) {
	var err error
	n := 0
	for {
		n += q.postPlain(wrs[n:])
		if n == len(wrs) {
			break
		}
		if m := q.postAtomics(wrs[n:]); m > 0 {
			if n += m; n == len(wrs) {
				break
			}
			continue
		}
		if err = q.postOneSend(&wrs[n]); err != nil {
			err = fmt.Errorf("work request %d: %w", n, err)
			break
		}
		n++
	}
	if n > 0 {
		q.ringSend()
	}
	return n, err
}

// postPlain writes the WQEs of wrs' leading plain requests and returns
// how many it wrote. A plain request has an opcode of q.fastOps
// (provider.PlainSendOps, or a send on UD, with an address handle of this
// device), at most the QP's SGEs, at most provider.MaxSendLength bytes
// (with SendInline: at most the QP's inline bytes, and not an RDMA read)
// and room in the queue, and its WQE ends before the ring does. Its loop
// makes no call but to copy inline data, and writes the segments a 64-bit
// store at a time: Go keeps nothing in registers across a call, so a call
// a request would cost its arguments, a frame and reloads.
func (q *queuePair) postPlain(wrs []provider.SendWR) int {
	sq := &q.sq
	for n := range wrs {
		wr := &wrs[n]
		nsge := uint32(len(wr.SGL))
		idx := sq.curPost & (sq.wqeCnt - 1)
		if q.fastOps>>wr.Opcode&1 == 0 || nsge > q.cap.MaxSendSGE || sq.head-sq.tail.Load() >= sq.maxPost {
			return n
		}
		op := wr.Opcode & 31                        // below 32, as fastOps says: the shifts below need no test
		room := uint32(len(sq.mem)) - idx*sendWQEBB // bytes before the ring's end
		wqe := unsafe.Add(unsafe.Pointer(unsafe.SliceData(sq.mem)), idx*sendWQEBB)
		seg := unsafe.Add(wqe, ctrlSize)
		if q.ud {
			// The datagram segment: the AH's address vector, with the
			// request's Q_Key and destination QP.
			var ah *addressHandle
			if wr.AH != nil {
				ah, _ = wr.AH.AH.(*addressHandle)
			}
			if ah == nil || ctrlSize+avSize > room {
				return n // postOneSend refuses it, or wraps it
			}
			av := &ah.av
			storeBE64(unsafe.Add(seg, avQKey), uint64(wr.RemoteQKey)<<32|uint64(be.Uint32(av[avQKey+4:])))
			storeBE64(unsafe.Add(seg, avDQPDCT), uint64(wr.RemoteQPN&0xffffff|extendedUDAV)<<32|uint64(be.Uint32(av[avDQPDCT+4:])))
			for i := 16; i < avSize; i += 8 {
				*(*uint64)(unsafe.Add(seg, i)) = binary.NativeEndian.Uint64(av[i:])
			}
			seg = unsafe.Add(seg, avSize)
			room -= avSize - segSize // the room checks below allow one segment for a header
		}
		if raddrOps>>op&1 != 0 { // in the first block: in the ring, published or not
			storeBE64(unsafe.Add(seg, raddrAddr), wr.RemoteAddr)
			storeBE64(unsafe.Add(seg, raddrRKey), uint64(wr.RKey)<<32) // and the reserved word
			seg = unsafe.Add(seg, segSize)
		}
		if wr.Flags&provider.SendInline == 0 {
			// At most ctrl, raddr and the SGEs: 2+nsge segments.
			if (2+nsge)*segSize > room {
				return n
			}
			var length uint64
			for _, s := range wr.SGL {
				if s.Length == 0 {
					continue // the device takes no empty segment
				}
				length += uint64(s.Length)
				storeBE64(unsafe.Add(seg, dataByteCount), uint64(s.Length)<<32|uint64(s.LKey))
				storeBE64(unsafe.Add(seg, dataAddr), s.Addr)
				seg = unsafe.Add(seg, segSize)
			}
			if length > provider.MaxSendLength {
				return n // postOneSend refuses it, with nothing published
			}
		} else {
			var length uint64
			for _, s := range wr.SGL {
				length += uint64(s.Length)
			}
			// ctrl, raddr and the inline segment: its header and the
			// bytes, padded to a segment.
			size := (inlineHeader + uint32(length) + segSize - 1) &^ (segSize - 1)
			if op == provider.WRRDMARead || length > uint64(q.cap.MaxInlineData) || 2*segSize+size > room {
				return n
			}
			putInline(seg, wr.SGL, uint32(length), size)
			seg = unsafe.Add(seg, size)
		}
		ds := uint32(uintptr(seg)-uintptr(wqe)) / segSize
		var imm uint32
		if immOps>>op&1 != 0 {
			imm = wr.Imm
		}
		// The ctrl segment: opmod, index and opcode; QPN and size; the
		// signature and reserved bytes, zero, and fm_ce_se; the immediate.
		storeBE64(unsafe.Add(wqe, ctrlOpmodIdxOpcode), uint64((sq.curPost&0xffff)<<8|uint32(wqeOpcode[op]))<<32|uint64(q.k.QPN<<8|ds))
		storeBE64(unsafe.Add(wqe, ctrlSignature), uint64(ctrlFlags[wr.Flags&7]|q.sigFlag)<<32|uint64(imm))
		q.bfWord = *(*uint64)(wqe)
		sq.wrid[idx] = wr.WRID
		sq.wqeHead[idx] = sq.head
		sq.curPost += (ds*segSize + sendWQEBB - 1) / sendWQEBB
		sq.head++
	}
	return len(wrs)
}

// postAtomics writes the WQEs of wrs' leading atomics, as postPlain does
// plain requests, and returns how many it wrote. It takes an atomic on an
// RC QP (q.atomics) with one SGE of at least 8 bytes (and at most
// provider.MaxSendLength), an 8-aligned remote address, no SendInline and
// room in the queue; postOneSend posts what else provider.CheckSend lets
// through (more SGEs) and refuses the rest. Its own loop, not a branch of
// postPlain's: there, the atomics' segments would take registers from the
// common requests' loop. An atomic's WQE (ctrl,
// raddr, atomic and one data segment, to which the device writes the
// 8-byte original value) is one basic block, so it never passes the
// ring's end; and a QP takes at least one SGE (size).
func (q *queuePair) postAtomics(wrs []provider.SendWR) int {
	sq := &q.sq
	for n := range wrs {
		wr := &wrs[n]
		if q.atomics>>wr.Opcode&1 == 0 || len(wr.SGL) != 1 || wr.SGL[0].Length-8 > provider.MaxSendLength-8 ||
			wr.RemoteAddr&7 != 0 || wr.Flags&provider.SendInline != 0 || sq.head-sq.tail.Load() >= sq.maxPost {
			return n
		}
		sge := &wr.SGL[0]
		idx := sq.curPost & (sq.wqeCnt - 1)
		wqe := unsafe.Add(unsafe.Pointer(unsafe.SliceData(sq.mem)), idx*sendWQEBB)
		swapAdd, compare := wr.CompareAdd, uint64(0) // fetch and add
		if wr.Opcode == provider.WRAtomicCmpSwp {
			swapAdd, compare = wr.Swap, wr.CompareAdd
		}
		const ds = 4
		storeBE64(unsafe.Add(wqe, ctrlOpmodIdxOpcode), uint64((sq.curPost&0xffff)<<8|uint32(wqeOpcode[wr.Opcode&31]))<<32|uint64(q.k.QPN<<8|ds))
		storeBE64(unsafe.Add(wqe, ctrlSignature), uint64(ctrlFlags[wr.Flags&7]|q.sigFlag)<<32)
		storeBE64(unsafe.Add(wqe, segSize+raddrAddr), wr.RemoteAddr)
		storeBE64(unsafe.Add(wqe, segSize+raddrRKey), uint64(wr.RKey)<<32) // and the reserved word
		storeBE64(unsafe.Add(wqe, 2*segSize+atomicSwapAdd), swapAdd)
		storeBE64(unsafe.Add(wqe, 2*segSize+atomicCompare), compare)
		storeBE64(unsafe.Add(wqe, 3*segSize+dataByteCount), 8<<32|uint64(sge.LKey))
		storeBE64(unsafe.Add(wqe, 3*segSize+dataAddr), sge.Addr)
		q.bfWord = *(*uint64)(wqe)
		sq.wrid[idx] = wr.WRID
		sq.wqeHead[idx] = sq.head
		sq.curPost += ds * segSize / sendWQEBB
		sq.head++
	}
	return len(wrs)
}

// putInline writes an inline data segment of size bytes at p, which the
// ring holds whole: the byte count with the inline bit, the SGEs' bytes
// (length in all), and zeros to the end.
func putInline(p unsafe.Pointer, sgl []provider.SGE, length, size uint32) {
	b := unsafe.Slice((*byte)(p), size)
	be.PutUint32(b, length|inlineSeg)
	dst := b[inlineHeader:]
	for _, s := range sgl {
		dst = dst[copy(dst, provider.UserBytes(s.Addr, s.Length)):]
	}
	clear(dst)
}

// storeBE64 stores v big-endian at p: one 8-byte store of the swapped
// word. (binary.BigEndian.PutUint64 into the ring splits its store into
// byte and halfword stores where the compiler knows some of v's bytes are
// zero, as it does for most ctrl and data segment words.)
func storeBE64(p unsafe.Pointer, v uint64) { *(*uint64)(p) = beWord64(v) }

// beWord64 returns the native word whose bytes in memory are v's,
// big-endian: v itself, or v byte-swapped (one BSWAP).
func beWord64(v uint64) uint64 {
	if !hostBigEndian {
		return bits.ReverseBytes64(v)
	}
	return v
}

// Which opcodes (bits by provider.WR*) carry a remote address segment
// (besides the atomics), which carry the ctrl segment's immediate (or the
// rkey to invalidate), and which are atomics.
const (
	raddrOps  = 1<<provider.WRRDMAWrite | 1<<provider.WRRDMAWriteWithImm | 1<<provider.WRRDMARead
	immOps    = 1<<provider.WRSendWithImm | 1<<provider.WRRDMAWriteWithImm | 1<<provider.WRSendWithInv
	atomicOps = 1<<provider.WRAtomicCmpSwp | 1<<provider.WRAtomicFetchAdd
)

// ctrlFlags maps a request's fence, signaled and solicited flags (the low
// three bits of provider.SendWR.Flags) to the ctrl segment's fm_ce_se.
var ctrlFlags = func() (t [8]uint8) {
	for f := range t {
		if f&provider.SendFence != 0 {
			t[f] |= ctrlFence
		}
		if f&provider.SendSignaled != 0 {
			t[f] |= ctrlCQUpdate
		}
		if f&provider.SendSolicited != 0 {
			t[f] |= ctrlSolicited
		}
	}
	return t
}()

// ringSend publishes the posted WQEs: the doorbell record, after the WQEs
// are in memory, then the 8-byte doorbell with the last WQE's first bytes.
//
// Every QP of a context rings the same half of one blue-flame register
// (with dynamic UARs the first register of the context's one blue-flame
// page; with static ones the register the kernel picked, which it shares
// among QPs too), with no lock beside the QP's own and without
// alternating halves. That is sound because a doorbell here is one
// 8-byte store and never a blue-flame copy: the device takes each 8-byte
// write to the register as a doorbell naming its QP (qpn_ds) and WQE
// counter by itself, whatever other QPs write there. rdma-core rings so
// wherever it copies no WQE: register 0 "does not exercise odd/even
// policy so it can avoid a lock but it may not use blue flame"
// (need_uuar_lock in providers/mlx5/mlx5.c; its buf_size is 0, so
// post_send_db's bf->offset ^= bf->buf_size leaves it), and the kernel
// hands register 0 to every QP past its low- and medium-latency ones
// (alloc_bfreg in drivers/infiniband/hw/mlx5/qp.c: bfregn = 0,
// count[0]++), so many QPs' doorbells meet on that half, unlocked; with
// MLX5_SHUT_UP_BF=1 and dynamic UARs every QP gets the context's one
// non-cached register (mlx5_get_qp_uar returns ctx->nc_uar: buf_size 0,
// need_lock 0). What rdma-core's lock on shared registers (bf->need_lock)
// and its alternation guard is the blue-flame copy: a WQE of up to
// buf_size bytes written as 64-byte chunks, which another CPU's copy into
// the same half would interleave, and which the device may still be
// reading when the next copy to that half starts; and the shared
// bf->offset word itself. Without copies, blue flame's latency is what
// goverbs gives up (the device fetches the WQE by DMA), not correctness.
// A QP that ever copies WQEs needs a register of its own, alternated
// under its lock, as rdma-core's dedicated registers are.
// internal/mlx5model flags any write past a half's first 8 bytes
// (TestSharedHalfTakesOnlyDoorbells, TestProviderSharedDoorbellHalf).
//
// The fence after the store, which rdma-core also takes, empties the
// CPU's write-combining buffer before the QP's lock is given back, so two
// doorbells of one QP reach the device in order.
func (q *queuePair) ringSend() {
	if raceBuild {
		q.sq.pub.Store(q.sq.head)
	}
	dmaFence()
	storeBE32(unsafe.Add(q.db, dbrecSend), q.sq.curPost&0xffff)
	wcFence()
	mmioStore64(q.bf, q.bfWord)
	wcFence()
}

// postOneSend writes one request's WQE; ringSend publishes it. A plain
// request (an opcode of provider.PlainSendOps, no inline data, at most
// the QP's SGEs) is checked here, its length as its data segments are
// written; anything else by provider.CheckSend first.
func (q *queuePair) postOneSend(wr *provider.SendWR) error {
	inline := wr.Flags&provider.SendInline != 0
	var length uint64
	if q.plainOps>>wr.Opcode&1 == 0 || inline || uint32(len(wr.SGL)) > q.cap.MaxSendSGE {
		var err error
		if wr.Opcode == provider.WRAtomicWrite || wr.Opcode == provider.WRFlush {
			return errNoRemoteOp(wr.Opcode)
		}
		if length, err = provider.CheckSend(wr, q.typ, q.cap.MaxSendSGE, q.cap.MaxInlineData); err != nil {
			return err
		}
		if wr.Opcode == provider.WRBindMW || wr.Opcode == provider.WRLocalInv {
			return q.postWindowOp(wr)
		}
	}
	var ah *addressHandle
	if q.ud {
		if wr.AH != nil {
			ah, _ = wr.AH.AH.(*addressHandle)
		}
		if ah == nil {
			return fmt.Errorf("a UD send needs an address handle of this device: %w", unix.EINVAL)
		}
	}
	sq := &q.sq
	if sq.head-sq.tail.Load() >= sq.maxPost {
		return fmt.Errorf("send queue full (%d entries): %w", sq.maxPost, unix.ENOMEM)
	}
	idx := sq.curPost & (sq.wqeCnt - 1)
	w := wqeWriter{ring: sq.mem, off: int(idx) * sendWQEBB}
	ctrl := w.seg()
	if ah != nil {
		av := w.segs(avSize)
		av.put(ah.av[:])
		av.be32(avQKey, wr.RemoteQKey)
		av.be32(avDQPDCT, wr.RemoteQPN&0xffffff|extendedUDAV)
	}
	switch wr.Opcode {
	case provider.WRRDMAWrite, provider.WRRDMAWriteWithImm, provider.WRRDMARead:
		putRaddr(w.seg(), wr.RemoteAddr, wr.RKey)
	case provider.WRAtomicCmpSwp, provider.WRAtomicFetchAdd:
		putRaddr(w.seg(), wr.RemoteAddr, wr.RKey)
		a := w.seg()
		if wr.Opcode == provider.WRAtomicCmpSwp {
			be.PutUint64(a[atomicSwapAdd:], wr.Swap)
			be.PutUint64(a[atomicCompare:], wr.CompareAdd)
		} else {
			be.PutUint64(a[atomicSwapAdd:], wr.CompareAdd)
			be.PutUint64(a[atomicCompare:], 0)
		}
		// The device writes the 8-byte original value to the first SGE.
		d := w.seg()
		be.PutUint32(d[dataByteCount:], 8)
		be.PutUint32(d[dataLKey:], wr.SGL[0].LKey)
		be.PutUint64(d[dataAddr:], wr.SGL[0].Addr)
	}
	switch {
	case wr.Opcode == provider.WRAtomicCmpSwp || wr.Opcode == provider.WRAtomicFetchAdd:
	case inline:
		w.inline(wr.SGL, uint32(length))
	default:
		length = 0
		for _, s := range wr.SGL {
			if s.Length == 0 {
				continue // the device takes no empty segment
			}
			length += uint64(s.Length)
			d := w.seg()
			be.PutUint32(d[dataByteCount:], s.Length)
			be.PutUint32(d[dataLKey:], s.LKey)
			be.PutUint64(d[dataAddr:], s.Addr)
		}
		if length > provider.MaxSendLength { // nothing is published
			return fmt.Errorf("%d bytes: %w", length, unix.EINVAL)
		}
	}
	ds := uint32(w.n / segSize)
	var fl uint8
	if wr.Flags&provider.SendSignaled != 0 || q.sigAll {
		fl |= ctrlCQUpdate
	}
	if wr.Flags&provider.SendSolicited != 0 {
		fl |= ctrlSolicited
	}
	if wr.Flags&provider.SendFence != 0 {
		fl |= ctrlFence
	} else {
		fl |= q.fence
	}
	if q.fence != 0 {
		q.resumeFast()
	}
	be.PutUint32(ctrl[ctrlOpmodIdxOpcode:], (sq.curPost&0xffff)<<8|uint32(wqeOpcode[wr.Opcode]))
	be.PutUint32(ctrl[ctrlQPNDS:], q.k.QPN<<8|ds)
	ctrl[ctrlSignature], ctrl[9], ctrl[10], ctrl[ctrlFMCESE] = 0, 0, 0, fl
	var imm uint32
	switch wr.Opcode {
	case provider.WRSendWithImm, provider.WRRDMAWriteWithImm, provider.WRSendWithInv:
		imm = wr.Imm
	}
	be.PutUint32(ctrl[ctrlImm:], imm)
	sq.wrid[idx] = wr.WRID
	sq.wqeHead[idx] = sq.head
	sq.curPost += (ds*segSize + sendWQEBB - 1) / sendWQEBB
	sq.head++
	q.bfWord = binary.NativeEndian.Uint64(ctrl[:8])
	return nil
}

// errNoRemoteOp refuses an ATOMIC_WRITE or a FLUSH: mlx5 has neither,
// in goverbs as in rdma-core's mlx5 provider (whose ops table sets no
// wr_atomic_write or wr_flush), whatever the kernel.
func errNoRemoteOp(op uint32) error {
	name := "atomic write"
	if op == provider.WRFlush {
		name = "flush"
	}
	return fmt.Errorf("%s: mlx5 lacks it (neither goverbs' nor rdma-core's mlx5 provider has it): %w", name, errs.ErrNotSupported)
}

// postWindowOp writes the UMR WQE of a memory window's bind or local
// invalidation (CheckSend checked wr.Bind), as rdma-core's mlx5 provider
// lays it out: the ctrl segment, whose immediate names the window by its
// current key; the UMR control segment, saying which fields of the
// window's mkey change; the mkey context, the window's new state (its
// key's low byte, the QP a type-2 window is bound to, the rights and
// range, or free); and for a bind of a range, one KLM entry, the range
// in its MR, in a 64-byte block. A bind is 192 bytes, an invalidation
// or a type-1 unbind 128. The next WQE carries the small fence
// (q.fence). The window's key and state move as on rxe (putWindowOp
// there): nothing fails between here and the doorbell.
//
//go:noinline
func (q *queuePair) postWindowOp(wr *provider.SendWR) error {
	b, sq := wr.Bind, &q.sq
	bind := wr.Opcode == provider.WRBindMW
	if bind && b.Length > 1<<31 {
		return fmt.Errorf("memory window of %d bytes (an mlx5 window's one translation entry spans at most 2 GiB): %w", b.Length, unix.EOPNOTSUPP)
	}
	size := umrInvSize
	if bind && b.Length != 0 {
		size = umrBindSize
	}
	nbb := uint32(size / sendWQEBB)
	slots := (nbb + sq.wqeBB - 1) / sq.wqeBB // the WQEs' room it takes
	if sq.head-sq.tail.Load()+slots > sq.maxPost {
		return fmt.Errorf("send queue full (%d entries, a window's request takes %d): %w", sq.maxPost, slots, unix.ENOMEM)
	}
	mw := b.MW
	cur := mw.RKey.Load()
	next, typ := cur, mw.Type
	if bind {
		next = provider.NextRKey(cur)
	} else {
		typ = 2 // an invalidation unbinds a type-2 window (CheckSend)
	}
	idx := sq.curPost & (sq.wqeCnt - 1)
	w := wqeWriter{ring: sq.mem, off: int(idx) * sendWQEBB}
	ctrl := w.seg()
	umr := w.segs(umrCtrlSize)
	umr.zero(umrCtrlSize)
	flags := uint8(umrFlagTransOffset | umrFlagInline)
	mask := uint64(umrMaskFree | umrMaskMkey)
	if typ == 2 {
		mask |= umrMaskQPN
	}
	mkey := w.segs(mkeyCtxSize)
	mkey.zero(mkeyCtxSize)
	qpn := uint32(0xffffff) // a type-1 window, or a window freed, is bound to no QP
	if size == umrBindSize {
		if typ == 2 {
			flags |= umrFlagCheckFree
			qpn = q.k.QPN
		}
		mask |= umrMaskLen | umrMaskStartAddr | umrMaskLocalWrite | umrMaskRemoteRead | umrMaskRemoteWrite | umrMaskAtomic
		umr.be16(umrKLMOctowords, umrKLMOctowordsBind)
		var acc uint8
		for _, f := range [...]struct {
			ib  uint32
			dev uint8
		}{{1, mkeyAccessLocalWrite}, {2, mkeyAccessRemoteWrt}, {4, mkeyAccessRemoteRead}, {8, mkeyAccessAtomic}} {
			if b.Access&f.ib != 0 {
				acc |= f.dev
			}
		}
		mkey.at(mkeyAccessFlags)[0] = acc
		mkey.be64(mkeyStartAddr, b.Addr)
		mkey.be64(mkeyLen, b.Length)
		klm := w.segs(klmBlockSize)
		klm.zero(klmBlockSize)
		klm.be32(klmByteCount, uint32(b.Length))
		klm.be32(klmMkey, b.MR.LKey)
		klm.be64(klmAddress, b.Addr)
	} else {
		if typ == 2 {
			flags |= umrFlagCheckQPN
		}
		mkey.at(mkeyFree)[0] = mkeyFreeBit
	}
	umr.at(umrFlags)[0] = flags
	umr.be64(umrMkeyMask, mask)
	mkey.be32(mkeyQPNMkey, qpn<<8|next&0xff)

	fl := q.fence
	if wr.Flags&provider.SendFence != 0 {
		fl = ctrlFence
	}
	if wr.Flags&provider.SendSignaled != 0 || q.sigAll {
		fl |= ctrlCQUpdate
	}
	if wr.Flags&provider.SendSolicited != 0 {
		fl |= ctrlSolicited
	}
	ds := uint32(size / segSize)
	be.PutUint32(ctrl[ctrlOpmodIdxOpcode:], (sq.curPost&0xffff)<<8|opUMR)
	be.PutUint32(ctrl[ctrlQPNDS:], q.k.QPN<<8|ds)
	ctrl[ctrlSignature], ctrl[9], ctrl[10], ctrl[ctrlFMCESE] = 0, 0, 0, fl
	be.PutUint32(ctrl[ctrlImm:], cur)
	sq.umrOp[idx] = uint8(cq.OpLocalInv)
	if bind {
		sq.umrOp[idx] = uint8(cq.OpBindMW)
	}
	sq.wrid[idx] = wr.WRID
	sq.wqeHead[idx] = sq.head + slots - 1 // its completion frees all its room
	sq.curPost += nbb
	sq.head += slots
	q.bfWord = binary.NativeEndian.Uint64(ctrl[:8])
	mw.RKey.Store(next)
	mw.Bound.Store(bind && typ == 2)
	if q.fence == 0 {
		q.heldOps = [2]uint32{q.fastOps, q.atomics}
		q.fastOps, q.atomics = 0, 0
	}
	q.fence = ctrlSmallFence
	return nil
}

// resumeFast gives the fast loops their opcodes back once the WQE after
// a UMR carries its fence.
func (q *queuePair) resumeFast() {
	q.fastOps, q.atomics = q.heldOps[0], q.heldOps[1]
	q.fence = 0
}

func putRaddr(s []byte, addr uint64, rkey uint32) {
	be.PutUint64(s[raddrAddr:], addr)
	be.PutUint32(s[raddrRKey:], rkey)
	be.PutUint32(s[raddrRKey+4:], 0)
}

// PostRecv writes each request into the receive queue, then publishes
// the new head in the doorbell record; the device needs no MMIO write.
func (q *queuePair) PostRecv(wrs []provider.RecvWR) (int, error) {
	rq := &q.rq
	if rq.wqeCnt == 0 {
		if q.srq != nil {
			return 0, fmt.Errorf("the QP receives through its SRQ: %w", unix.EINVAL)
		}
		return 0, fmt.Errorf("the QP has no receive queue: %w", unix.EINVAL)
	}
	var err error
	n := 0
	for ; n < len(wrs); n++ {
		wr := &wrs[n]
		if uint32(len(wr.SGL)) > rq.maxGS {
			err = fmt.Errorf("work request %d: %d SGEs, the QP takes %d: %w", n, len(wr.SGL), rq.maxGS, unix.EINVAL)
			break
		}
		if rq.head-rq.tail.Load() >= rq.wqeCnt {
			err = fmt.Errorf("work request %d: receive queue full (%d entries): %w", n, rq.wqeCnt, unix.ENOMEM)
			break
		}
		idx := rq.head & (rq.wqeCnt - 1)
		// The slot holds maxGS segments (CreateQP sized it), and the
		// request at most that many.
		d := unsafe.Add(unsafe.Pointer(unsafe.SliceData(rq.mem)), idx<<rq.shift)
		j := uint32(0)
		for _, s := range wr.SGL {
			if s.Length == 0 {
				continue
			}
			storeBE64(unsafe.Add(d, dataByteCount), uint64(s.Length)<<32|uint64(s.LKey))
			storeBE64(unsafe.Add(d, dataAddr), s.Addr)
			d = unsafe.Add(d, dataSize)
			j++
		}
		if j < rq.maxGS {
			storeBE64(unsafe.Add(d, dataByteCount), invalidLKey)
			storeBE64(unsafe.Add(d, dataAddr), 0)
		}
		rq.wrid[idx] = wr.WRID
		rq.head++
	}
	if n > 0 {
		if raceBuild {
			rq.pub.Store(rq.head)
		}
		dmaFence()
		storeBE32(unsafe.Add(q.db, dbrecRecv), rq.head&0xffff)
	}
	return n, err
}

// CleanCQ takes the QP's completions out of a CQ's ring (the QP was
// reset): the others move up over them, in order, and the consumer index
// passes the freed slots. It runs exclusive of the CQ's Poll.
func (q *queuePair) CleanCQ(pc provider.CQ) {
	c, ok := pc.(*completionQueue)
	if !ok || c.buf == nil {
		return
	}
	c.clean(q.key, q.srq)
}

// Reset starts the QP's queues over, as the device does at RESET.
func (q *queuePair) Reset() {
	if q.buf == nil {
		return
	}
	q.sq.curPost, q.sq.head = 0, 0
	if q.fence != 0 {
		q.resumeFast()
	}
	q.sq.tail.Store(0)
	q.rq.head = 0
	q.rq.tail.Store(0)
	storeBE32(unsafe.Add(q.db, dbrecRecv), 0)
	storeBE32(unsafe.Add(q.db, dbrecSend), 0)
}

// Destroy destroys the QP in the kernel, then frees its queues.
func (q *queuePair) Destroy() (uint32, error) {
	ev, err := kverbs.DestroyQP(q.ctx.conn, q.k.Handle)
	if err != nil {
		return ev, err
	}
	q.Release()
	return ev, nil
}

// Release forgets the QP and frees its queues. A QP on an SRQ leaves a
// stand-in in the table (ghostOf).
func (q *queuePair) Release() {
	if q.buf == nil {
		return
	}
	var ghost *queuePair
	if q.srq != nil {
		ghost = ghostOf(q)
	}
	q.ctx.setQP(q.key, ghost)
	q.free()
}

// ghostOf returns the stand-in of a destroyed QP on an SRQ. Completions of
// its receives may still be queued in its CQ, each naming an SRQ WQE that
// only Poll gives back (rdma-core cleans them out of the CQ at destroy,
// under the CQ's lock, which the provider cannot take there). Poll finds
// the stand-in, frees the WQE and reports nothing. It stays until its key
// is reused or its SRQ released.
func ghostOf(q *queuePair) *queuePair {
	return &queuePair{ctx: q.ctx, key: q.key, srq: q.srq, gone: true}
}

// dropStale consumes a completion c of a destroyed QP (q is its stand-in):
// a receive's SRQ WQE is free again.
//
//go:noinline
func (q *queuePair) dropStale(c *cqe64) {
	if !c.sendSide() && c.opcode() != cqeResizeCQ {
		q.srq.complete(c.wqeCounter())
	}
}

func (q *queuePair) free() {
	q.buf.free()
	q.buf = nil
	if q.db != nil {
		q.ctx.dbs.put(q.db)
		q.db = nil
	}
}

// wqeWriter writes the 16-byte segments of one send WQE into the send
// ring, going on at the ring's start when a WQE runs past its end.
type wqeWriter struct {
	ring []byte
	off  int // where the next segment goes
	n    int // bytes written
}

// seg returns the next 16-byte segment.
func (w *wqeWriter) seg() []byte {
	if w.off == len(w.ring) {
		w.off = 0
	}
	s := w.ring[w.off : w.off+segSize : w.off+segSize]
	w.off += segSize
	w.n += segSize
	return s
}

// segs returns n bytes (a multiple of 16) of segments, which may wrap.
func (w *wqeWriter) segs(n int) segRun {
	r := segRun{w: *w}
	for i := 0; i < n; i += segSize {
		w.seg()
	}
	return r
}

// segRun writes into a run of segments that may wrap.
type segRun struct{ w wqeWriter }

func (r segRun) at(off int) []byte {
	p := (r.w.off + off) & (len(r.w.ring) - 1) // the ring's size is a power of two: a mask, not a division
	return r.w.ring[p:]
}

func (r segRun) put(b []byte) {
	for i := 0; i < len(b); i += segSize {
		copy(r.at(i)[:segSize], b[i:min(i+segSize, len(b))])
	}
}

func (r segRun) be32(off int, v uint32) { be.PutUint32(r.at(off), v) }

func (r segRun) be16(off int, v uint16) { be.PutUint16(r.at(off), v) }

// be64 writes v at off, which is 8-aligned: within one segment.
func (r segRun) be64(off int, v uint64) { be.PutUint64(r.at(off), v) }

// zero clears the run's first n bytes.
func (r segRun) zero(n int) {
	for i := 0; i < n; i += segSize {
		clear(r.at(i)[:segSize])
	}
}

// inline writes an inline data segment holding the SGEs' bytes, padded to
// 16 bytes.
func (w *wqeWriter) inline(sgl []provider.SGE, length uint32) {
	total := alignUp(inlineHeader+int(length), segSize)
	r := w.segs(total)
	r.be32(0, length|inlineSeg)
	off := inlineHeader
	for _, s := range sgl {
		src := provider.UserBytes(s.Addr, s.Length)
		for len(src) > 0 {
			dst := r.at(off)
			// Stop at the end of the segment, where the ring may wrap.
			room := segSize - off%segSize
			k := copy(dst[:min(room, len(src))], src)
			src, off = src[k:], off+k
		}
	}
	if pad := total - off; pad > 0 {
		for ; off < total; off++ {
			r.at(off)[0] = 0
		}
	}
}

// addressHandle is an mlx5 address handle: the address vector that UD send WQEs
// carry, built once here, with the destination MAC the kernel resolved.
type addressHandle struct {
	ctx    *context
	handle uint32
	av     [avSize]byte
}

// CreateAH creates the address handle in the kernel and builds its
// address vector.
func (c *context) CreateAH(pd uint32, userHandle uint64, attr *provider.AHAttr) (provider.AH, error) {
	var resp uapi.Mlx5IBCreateAHResp
	h, err := kverbs.CreateAH(c.conn, pd, userHandle, attr, bytesOf(&resp))
	if err != nil {
		return nil, err
	}
	a := &addressHandle{ctx: c, handle: h}
	buildAV(&a.av, attr, resp.Dmac)
	return a, nil
}

// buildAV fills an address vector (struct mlx5_wqe_av) from the kernel's
// address attributes; the qkey and remote QPN go in at post time.
func buildAV(av *[avSize]byte, attr *provider.AHAttr, dmac [6]uint8) {
	av[avStatRateSL] = attr.StaticRate<<4 | attr.Sl&0xf
	av[avFLMLID] = attr.SrcPathBits & 0x7f
	be.PutUint16(av[avRLID:], attr.Dlid)
	copy(av[avRMAC:avRMAC+6], dmac[:])
	if attr.IsGlobal != 0 {
		g := &attr.Grh
		be.PutUint32(av[avGRHGIDFL:], 1<<30|uint32(g.SgidIndex)<<20|g.FlowLabel&0xfffff)
		av[avHopLimit] = g.HopLimit
		av[avTClass] = g.TrafficClass
		copy(av[avRGID:avRGID+16], g.Dgid[:])
	}
}

// Handle returns the kernel handle.
func (a *addressHandle) Handle() uint32 { return a.handle }

// Destroy destroys the address handle.
func (a *addressHandle) Destroy() error { return kverbs.DestroyAH(a.ctx.conn, a.handle) }
