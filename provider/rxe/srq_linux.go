package rxe

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/release"
	"github.com/goverbs/goverbs/uapi"
)

// sharedRecvQueue is an rxe shared receive queue: a ring of struct rxe_recv_wqe, as a
// QP's receive queue is, that the kernel consumes for every QP attached
// to it. Posting needs no syscall.
type sharedRecvQueue struct {
	c    *context
	k    kverbs.SRQ
	num  uint32
	rq   *queue
	sge  uint32      // the most SGEs a receive takes: the SRQ's cap, or what fits a slot if fewer
	size uint32      // the entries the ring holds
	mi   uapi.Mminfo // where a resize's new ring is, written by the kernel
}

// CreateSRQ creates the SRQ and maps its ring.
func (c *context) CreateSRQ(r kverbs.SRQReq) (provider.SRQ, error) {
	var resp uapi.RxeCreateSRQResp
	k, err := kverbs.CreateSRQ(c.conn, r, nil, bytesOf(&resp))
	if err != nil {
		return nil, err
	}
	s := &sharedRecvQueue{c: c, k: k, num: resp.SRQNum}
	if s.rq, err = mapQueue(c.fd, resp.Mi, recvWQEHeader); err != nil {
		kverbs.DestroySRQ(c.conn, k.Handle)
		return nil, fmt.Errorf("rxe shared receive queue: %w", err)
	}
	s.size = uint32(s.rq.size())
	s.sge = min(k.MaxSGE, uint32((s.rq.slotSize()-recvWQEHeader)/sgeSize))
	return s, nil
}

// Handle returns the kernel handle.
func (s *sharedRecvQueue) Handle() uint32 { return s.k.Handle }

// SRQN returns the SRQ's number (rxe's response has it).
func (s *sharedRecvQueue) SRQN() uint32 { return s.num }

// MaxWR returns how many receives the ring holds: what rxe made (a
// power of two less one), at least what was asked.
func (s *sharedRecvQueue) MaxWR() uint32 { return max(s.k.MaxWR, s.size) }

// MaxSGE returns the most SGEs a receive takes.
func (s *sharedRecvQueue) MaxSGE() uint32 { return s.k.MaxSGE }

// PostRecv writes each request into the ring, with queuePair.PostRecv's loop
// (which says why it is a copy).
func (s *sharedRecvQueue) PostRecv(wrs []provider.RecvWR) (int, error) {
	rq := s.rq
	for i := range wrs {
		wr := &wrs[i]
		if uint32(len(wr.SGL)) > s.sge { // one compare for the cap and the slot's room
			return i, recvErr(rq, s.k.MaxSGE, wrs, i)
		}
		prod := rq.prod.Load()
		if (prod+1)&rq.mask == rq.cons.Load() {
			return i, recvErr(rq, s.k.MaxSGE, wrs, i)
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

// Modify arms the limit event (kverbs.SRQLimit) and resizes the ring
// (kverbs.SRQMaxWR). The caller holds off posts while it resizes: rxe
// copies the posted receives into a new ring and gives its mmap
// information back through the command, and the old mapping is given up.
func (s *sharedRecvQueue) Modify(mask uint32, a kverbs.SRQAttr) error {
	// rxe reads its command whatever the mask; the mmap information is
	// written only by a resize. It lives in the SRQ, on the heap, where
	// the kernel's write cannot miss a moved goroutine stack.
	s.mi = uapi.Mminfo{}
	cmd := uapi.RxeModifySRQCmd{MmapInfoAddr: uapi.NewPointer(unsafe.Pointer(&s.mi))}
	if err := kverbs.ModifySRQ(s.c.conn, s.k.Handle, mask, a, bytesOf(&cmd)); err != nil {
		return err
	}
	if mask&kverbs.SRQMaxWR == 0 {
		return nil
	}
	rq, err := mapQueue(s.c.fd, s.mi, recvWQEHeader)
	s.rq.unmap() // the kernel consumes only the new ring now
	if err != nil {
		// The receives posted are in the new ring, which is not mapped:
		// every later post fails (recvErr says why).
		s.rq, s.size = lostRing(), 0
		return fmt.Errorf("rxe shared receive queue resized to %d, its new ring: %w", a.MaxWR, err)
	}
	s.rq, s.size = rq, uint32(rq.size())
	s.k.MaxWR = a.MaxWR
	return nil
}

// lostRing stands for a ring that could not be mapped after a resize:
// it reads as full and has no slots.
func lostRing() *queue {
	return &queue{prod: new(atomic.Uint32), cons: new(atomic.Uint32)}
}

// Destroy destroys the SRQ in the kernel, then unmaps its ring.
func (s *sharedRecvQueue) Destroy() (uint32, error) {
	n, err := kverbs.DestroySRQ(s.c.conn, s.k.Handle)
	if err != nil {
		return 0, err
	}
	s.rq.unmap()
	return n, nil
}

// Release unmaps the ring; the kernel destroyed the SRQ with its context.
func (s *sharedRecvQueue) Release() { s.rq.unmap() }

// recvErr says why sharedRecvQueue.PostRecv stopped at request i: more SGEs than the
// SRQ takes (capSGE), more than fit a slot, or a full ring.
//
//go:noinline
func recvErr(rq *queue, capSGE uint32, wrs []provider.RecvWR, i int) error {
	n := len(wrs[i].SGL)
	switch {
	case uint32(n) > capSGE:
		return wrErr(i, fmt.Errorf("%d SGEs, the SRQ takes %d: %w", n, capSGE, unix.EINVAL))
	case rq.mask == 0:
		return wrErr(i, fmt.Errorf("the ring was lost in a resize: %w", unix.EIO))
	case uintptr(n)*sgeSize > rq.slotSize()-recvWQEHeader:
		return wrErr(i, fmt.Errorf("%d SGEs do not fit a receive slot: %w", n, unix.EINVAL))
	}
	return wrErr(i, fmt.Errorf("receive queue full (%d entries): %w", rq.size(), unix.ENOMEM))
}
