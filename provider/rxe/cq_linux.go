package rxe

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// CQ is an rxe completion queue: its ring holds struct ib_uverbs_wc
// entries, which the kernel produces and Poll consumes without a syscall.
type CQ struct {
	conn   *transport.Conn
	handle uint32
	size   int
	ring   *queue
	notify *transport.Cmd // REQ_NOTIFY_CQ, reused: arming allocates nothing
}

// CreateCQ creates the CQ and maps its ring from the mmap info rxe returns.
func (c *context) CreateCQ(r kverbs.CQReq) (provider.CQ, error) {
	var resp uapi.RxeCreateCQResp
	k, err := kverbs.CreateCQ(c.conn, r, nil, bytesOf(&resp))
	if err != nil {
		return nil, err
	}
	ring, err := mapQueue(c.fd, resp.Mi, unsafe.Sizeof(uapi.IBUverbsWC{}))
	if err != nil {
		kverbs.DestroyCQ(c.conn, k.Handle)
		return nil, fmt.Errorf("rxe cq ring: %w", err)
	}
	return &CQ{conn: c.conn, handle: k.Handle, size: int(k.CQE), ring: ring, notify: new(transport.Cmd)}, nil
}

// Handle returns the kernel handle.
func (q *CQ) Handle() uint32 { return q.handle }

// Size returns the number of CQEs the CQ holds.
func (q *CQ) Size() int { return q.size }

// Poll copies up to len(wcs) completions out of the ring: acquire-load the
// producer index, copy each slot, release-store the consumer index once.
// It never passes the producer and never takes a CQE without a slot for it.
// Both indices are masked as they are read, as rdma-core's queue_empty
// does: an index the kernel (or a stray store) left out of range cannot
// make Poll hand back more than the ring holds.
func (q *CQ) Poll(wcs []cq.WC) int {
	r := q.ring
	cons := r.cons.Load() & r.mask // our own index
	prod := r.prod.Load() & r.mask // the kernel's: acquire
	n := 0
	for n < len(wcs) && cons != prod {
		convertWC(&wcs[n], (*uapi.IBUverbsWC)(r.slot(cons)))
		cons = (cons + 1) & r.mask
		n++
	}
	if n > 0 {
		r.cons.Store(cons) // release: the kernel may reuse the slots
	}
	return n
}

// The kernel's completion flags (enum ib_wc_flags), which rxe writes as
// they are.
const (
	kwcGRH            = 1 << 0
	kwcWithImm        = 1 << 1
	kwcWithInvalidate = 1 << 2
	kwcIPCsumOK       = 1 << 3
)

// convertWC translates one ib_uverbs_wc. On an error completion only
// wr_id, status, qp_num and vendor_err mean anything; the rest is zeroed.
func convertWC(w *cq.WC, k *uapi.IBUverbsWC) {
	if k.Status != uint32(cq.Success) {
		*w = cq.WC{WRID: k.WRID, Status: cq.Status(k.Status), VendorErr: k.VendorErr, QPNum: k.QPNum}
		return
	}
	var fl cq.Flags
	if k.WCFlags&kwcGRH != 0 {
		fl |= cq.WithGRH
	}
	if k.WCFlags&kwcIPCsumOK != 0 {
		fl |= cq.IPCsumOK
	}
	var imm uint32
	switch {
	case k.WCFlags&kwcWithImm != 0:
		fl |= cq.WithImm
		imm = binary.BigEndian.Uint32(k.Ex[:]) // __be32 imm_data
	case k.WCFlags&kwcWithInvalidate != 0:
		fl |= cq.WithInv
		imm = binary.NativeEndian.Uint32(k.Ex[:]) // invalidate_rkey, host order
	}
	*w = cq.WC{
		WRID:         k.WRID,
		Status:       cq.Success,
		Opcode:       cq.Opcode(k.Opcode),
		VendorErr:    k.VendorErr,
		ByteLen:      k.ByteLen,
		Imm:          imm,
		QPNum:        k.QPNum,
		SrcQP:        k.SrcQP,
		Flags:        fl,
		PKeyIndex:    k.PkeyIndex,
		SLID:         k.Slid,
		SL:           k.Sl,
		DLIDPathBits: k.DlidPathBits,
	}
}

// ReqNotify arms the CQ through the kernel (REQ_NOTIFY_CQ): rxe keeps the
// arm state in the kernel, where the completion is posted.
func (q *CQ) ReqNotify(solicitedOnly bool) error {
	return kverbs.ReqNotifyCQ(q.conn, q.notify, q.handle, solicitedOnly)
}

// Resize resizes the CQ in the kernel (RESIZE_CQ), which copies the
// unconsumed completions into a new ring (from our consumer index, which
// Poll keeps current in the ring), then maps the new ring. rxe refuses a
// size below the number of completions held (EINVAL).
func (q *CQ) Resize(n int) (int, error) {
	var resp uapi.RxeResizeCQResp
	cqe, err := kverbs.ResizeCQ(q.conn, q.handle, uint32(n), nil, bytesOf(&resp))
	if err != nil {
		return q.size, err
	}
	ring, err := mapQueue(q.conn.FD(), resp.Mi, unsafe.Sizeof(uapi.IBUverbsWC{}))
	if err != nil {
		return q.size, fmt.Errorf("rxe resized cq ring: %w", err)
	}
	q.ring.unmap()
	q.ring, q.size = ring, int(cqe)
	return q.size, nil
}

// EventRead does nothing: rxe has no arm sequence number.
func (q *CQ) EventRead() {}

// Destroy destroys the CQ in the kernel, then unmaps its ring.
func (q *CQ) Destroy() (kverbs.Events, error) {
	ev, err := kverbs.DestroyCQ(q.conn, q.handle)
	if err != nil {
		return ev, err
	}
	q.Release()
	return ev, nil
}

// Release unmaps the ring.
func (q *CQ) Release() { q.ring.unmap() }
