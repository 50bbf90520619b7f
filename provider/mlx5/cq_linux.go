package mlx5

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uapi"
)

// cqeBytes is the CQE size goverbs asks for. 64 is what rdma-core uses
// unless told otherwise; the poll path handles 128 too.
const cqeBytes = 64

// CQ is an mlx5 completion queue: a ring of CQEs in our memory that the
// device writes and Poll reads, a doorbell record that tells the device
// how far we have read, and a UAR doorbell that arms it. Polling and
// arming make no syscall.
type CQ struct {
	ctx    *context
	handle uint32
	cqn    uint32

	buf     dmaBuf
	ring    unsafe.Pointer // CQE 0 (its 64-byte part)
	ncqe    uint32         // a power of two
	lgNCQE  uint32
	cqeSize uint32 // 64 or 128

	db    unsafe.Pointer // doorbell record: be32 consumer index, be32 arm word
	ci    uint32         // consumer index, free-running
	armSN uint32         // arm sequence number: advanced per event read
}

// CreateCQ allocates the ring and doorbell record, then creates the CQ in
// the kernel, naming the UAR page that takes its arm doorbells.
func (c *context) CreateCQ(r kverbs.CQReq) (provider.CQ, error) {
	if r.CQE == 0 {
		return nil, fmt.Errorf("a CQ of 0 entries: %w", unix.EINVAL)
	}
	if r.CQE >= 1<<24 {
		return nil, fmt.Errorf("a CQ of %d entries, mlx5 takes at most %d: %w", r.CQE, 1<<24-1, unix.EINVAL)
	}
	q := &CQ{ctx: c, cqeSize: cqeBytes}
	if err := q.alloc(roundPow2(r.CQE + 1)); err != nil {
		return nil, err
	}
	db, err := c.dbs.get()
	if err != nil {
		q.buf.free()
		return nil, err
	}
	q.db = db
	req := uapi.Mlx5IBCreateCQ{
		BufAddr: uapi.NewPointer(q.buf.ptr()),
		DbAddr:  uapi.NewPointer(db),
		CQESize: q.cqeSize,
	}
	if c.dynamic {
		req.Flags |= uapi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX
		req.UARPageIndex = uint16(c.cqUAR.pageID)
	}
	var resp uapi.Mlx5IBCreateCQResp
	kr := r
	kr.CQE = q.ncqe - 1 // the kernel adds one and rounds up again
	k, err := kverbs.CreateCQ(c.conn, kr, bytesOf(&req), bytesOf(&resp))
	if err != nil {
		q.buf.free()
		c.dbs.put(db)
		return nil, err
	}
	q.handle, q.cqn = k.Handle, resp.Cqn
	return q, nil
}

// alloc sets up a ring of n CQEs (a power of two), every one invalid.
func (q *CQ) alloc(n uint32) error {
	buf, err := allocDMA(int(n * q.cqeSize))
	if err != nil {
		return err
	}
	initCQEs(buf, n, q.cqeSize)
	q.buf, q.ncqe, q.lgNCQE = buf, n, uint32(bits.TrailingZeros32(n))
	q.ring = unsafe.Add(buf.ptr(), q.cqeSize-cqeSize64)
	return nil
}

// initCQEs marks n CQEs of size bytes invalid, owned by the device.
func initCQEs(buf []byte, n, size uint32) {
	for i := uint32(0); i < n; i++ {
		buf[i*size+size-1] = cqeInvalid << cqeOpcodeShift
	}
}

func roundPow2(n uint32) uint32 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len32(n-1)
}

// Handle returns the kernel handle.
func (q *CQ) Handle() uint32 { return q.handle }

// Size returns the number of CQEs the CQ holds.
func (q *CQ) Size() int { return int(q.ncqe - 1) }

// cqe returns the 64-byte CQE at index i of the ring.
func (q *CQ) cqe(i uint32) cqeView {
	return unsafe.Slice((*byte)(unsafe.Add(q.ring, uintptr(i&(q.ncqe-1))*uintptr(q.cqeSize))), cqeSize64)
}

// opOwn reads a CQE's op_own byte with one atomic load of its last word,
// which the device writes last.
func opOwn(c cqeView) uint8 {
	w := atomic.LoadUint32((*uint32)(unsafe.Pointer(&c[cqeWQECounter])))
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], w)
	return b[3]
}

// owned reports whether the CQE at index i is ours: a valid opcode, and
// the owner bit of the pass the index is on.
func (q *CQ) owned(i uint32) (cqeView, bool) {
	c := q.cqe(i)
	oo := opOwn(c)
	if oo>>cqeOpcodeShift == cqeInvalid || uint32(oo&cqeOwnerMask) != i>>q.lgNCQE&1 {
		return nil, false
	}
	readFence() // the owner bit before the rest of the CQE
	return c, true
}

// Poll moves up to len(wcs) completions out of the ring, finding each
// work request's wr_id in its QP, then publishes the consumer index once.
func (q *CQ) Poll(wcs []cq.WC) int {
	n := 0
	ci := q.ci
	var qps qpLookup // the QP table, read once per batch
	for n < len(wcs) {
		c, ok := q.owned(ci)
		if !ok {
			break
		}
		ci++
		if q.complete(&wcs[n], c, &qps) {
			n++
		}
	}
	if ci != q.ci {
		q.ci = ci
		q.setCI()
	}
	return n
}

// qpLookup finds the QPs a batch of CQEs names: the context's table is
// loaded once per batch, and a run of CQEs of one QP (the common case)
// looks it up once.
type qpLookup struct {
	m    *map[uint32]*QP
	key  uint32
	last *QP
}

func (l *qpLookup) find(c *context, key uint32) *QP {
	if l.last != nil && l.key == key {
		return l.last
	}
	if l.m == nil {
		if l.m = c.qps.Load(); l.m == nil {
			return nil
		}
	}
	l.key, l.last = key, (*l.m)[key]
	return l.last
}

// setCI tells the device how far the ring has been read.
func (q *CQ) setCI() {
	storeBE32(unsafe.Add(q.db, dbrecSetCI), q.ci&0xffffff)
}

// complete turns one CQE into wc: decode, then the wr_id from the QP's
// send or receive queue, freeing the queue's slots. It returns false for
// a CQE that is not a completion to report (of a destroyed QP, say).
func (q *CQ) complete(w *cq.WC, c cqeView, qps *qpLookup) bool {
	key := c.qpn()
	if q.ctx.cqeVersion == 1 {
		key = c.uidx()
	}
	qp := qps.find(q.ctx, key)
	if qp == nil {
		return false // a QP destroyed with completions still queued
	}
	if !decodeCQE(w, c, qp.ud) {
		*w = cq.WC{Status: cq.GeneralErr, QPNum: c.qpn(), VendorErr: uint32(c[cqeOpOwn])}
		return true
	}
	if c.sendSide() {
		w.WRID = qp.sq.complete(c.wqeCounter())
	} else {
		w.WRID = qp.rq.completeRecv(c.wqeCounter())
	}
	return true
}

// ReqNotify arms the CQ: the arm word goes to the doorbell record, then,
// fenced on both sides, in one 8-byte store to the UAR page with the CQN.
func (q *CQ) ReqNotify(solicitedOnly bool) error {
	cmd := uint32(cqDBReqNot)
	if solicitedOnly {
		cmd = cqDBReqNotSol
	}
	arm := (q.armSN&3)<<28 | cmd | q.ci&0xffffff
	storeBE32(unsafe.Add(q.db, dbrecArm), arm)
	var b [8]byte
	binary.BigEndian.PutUint32(b[0:], arm)
	binary.BigEndian.PutUint32(b[4:], q.cqn)
	wcFence()
	mmioStore64(unsafe.Add(q.ctx.cqUAR.base, cqDoorbell), binary.NativeEndian.Uint64(b[:]))
	wcFence()
	return nil
}

// EventRead advances the arm sequence number: the device ignores an arm
// that does not carry the number of events read so far.
func (q *CQ) EventRead() { q.armSN++ }

// Resize moves the CQ to a ring of at least n entries. The device ends
// the old ring with a resize CQE; the completions before it are copied to
// the new ring, where the device goes on.
func (q *CQ) Resize(n int) (int, error) {
	if n <= 0 || n >= 1<<24 {
		return q.Size(), fmt.Errorf("%d entries: %w", n, unix.EINVAL)
	}
	ncqe := roundPow2(uint32(n) + 1)
	if ncqe == q.ncqe {
		return q.Size(), nil
	}
	if held := q.held(); held >= int(ncqe) {
		return q.Size(), fmt.Errorf("%d entries cannot hold the %d completions queued: %w", ncqe-1, held, unix.EINVAL)
	}
	old := *q
	if err := q.alloc(ncqe); err != nil {
		return old.Size(), err
	}
	fresh := *q
	*q = old
	req := uapi.Mlx5IBResizeCQ{BufAddr: uapi.NewPointer(fresh.buf.ptr()), CQESize: uint16(q.cqeSize)}
	if _, err := kverbs.ResizeCQ(q.ctx.conn, q.handle, ncqe-1, bytesOf(&req), nil); err != nil {
		fresh.buf.free()
		return q.Size(), err
	}
	// Copy what the old ring holds up to the resize CQE, each to the index
	// after its own: the resize CQE takes an index of the sequence.
	i := q.ci
	for {
		c, ok := q.owned(i)
		if !ok {
			// The kernel returned, so the device has written the marker.
			fresh.buf.free()
			return q.Size(), fmt.Errorf("mlx5 resize: no resize CQE in the old ring at %d: %w", i, unix.EIO)
		}
		if c.opcode() == cqeResizeCQ {
			break
		}
		d := fresh.cqe(i + 1)
		copy(d, c)
		d[cqeOpOwn] = d[cqeOpOwn]&^cqeOwnerMask | uint8((i+1)>>fresh.lgNCQE&1)
		i++
		if i-q.ci > q.ncqe {
			fresh.buf.free()
			return q.Size(), fmt.Errorf("mlx5 resize: no resize CQE in the old ring: %w", unix.EIO)
		}
	}
	q.buf.free()
	q.buf, q.ring, q.ncqe, q.lgNCQE = fresh.buf, fresh.ring, fresh.ncqe, fresh.lgNCQE
	q.ci++ // past the copied-over start: the index the resize CQE took
	q.setCI()
	return q.Size(), nil
}

// held counts the completions in the ring now.
func (q *CQ) held() int {
	n := 0
	for i := q.ci; n < int(q.ncqe); i++ {
		if _, ok := q.owned(i); !ok {
			break
		}
		n++
	}
	return n
}

// clean removes the completions of the QP named key (user index or QPN)
// from the ring: walking back from the newest, every other CQE moves up
// by the number removed so far, keeping the owner bit of its new slot;
// then the consumer index passes the freed slots.
func (q *CQ) clean(key uint32) {
	prod := q.ci + uint32(q.held())
	freed := uint32(0)
	for i := prod; i != q.ci; {
		i--
		c := q.cqe(i)
		k := c.qpn()
		if q.ctx.cqeVersion == 1 {
			k = c.uidx()
		}
		switch {
		case k == key && c.opcode() != cqeResizeCQ:
			freed++
		case freed > 0:
			dst, src := q.slot(i+freed), q.slot(i)
			own := dst[len(dst)-1] & cqeOwnerMask
			copy(dst, src)
			dst[len(dst)-1] = dst[len(dst)-1]&^cqeOwnerMask | own
		}
	}
	if freed > 0 {
		q.ci += freed
		q.setCI()
	}
}

// slot returns the whole slot (64 or 128 bytes) of index i.
func (q *CQ) slot(i uint32) []byte {
	off := uintptr(i&(q.ncqe-1)) * uintptr(q.cqeSize)
	return q.buf[off : off+uintptr(q.cqeSize)]
}

// Destroy destroys the CQ in the kernel, then frees its ring.
func (q *CQ) Destroy() (kverbs.Events, error) {
	ev, err := kverbs.DestroyCQ(q.ctx.conn, q.handle)
	if err != nil {
		return ev, err
	}
	q.Release()
	return ev, nil
}

// Release frees the ring and doorbell record.
func (q *CQ) Release() {
	if q.buf != nil {
		q.buf.free()
		q.buf = nil
		q.ctx.dbs.put(q.db)
	}
}

// storeBE32 stores v big-endian at p with one atomic store: doorbell
// records are ordinary memory the device reads.
func storeBE32(p unsafe.Pointer, v uint32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	atomic.StoreUint32((*uint32)(p), binary.NativeEndian.Uint32(b[:]))
}
