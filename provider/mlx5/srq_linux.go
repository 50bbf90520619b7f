package mlx5

import (
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uapi"
)

// The SRQ's WQE: a next segment (struct mlx5_wqe_srq_next_seg, 16 bytes,
// its be16 next_wqe_index at byte 2) and then the data segments.
const (
	srqNextSize  = 16
	srqNextIndex = 2
	// srqMinStride is the smallest WQE the kernel makes (mlx5_ib_create_srq
	// rounds the descriptor up to at least 32 bytes).
	srqMinStride = 32
)

// sharedRecvQueue is an mlx5 shared receive queue: a buffer of WQEs linked into a
// free list by their next segments, a doorbell record holding the count
// of receives posted, and the wr_ids by WQE index. The device takes the
// posted WQEs in list order, following each one's next index; a receive
// completion names the WQE it used (wqe_counter), and Poll links that
// WQE back at the list's tail.
//
// The list always keeps one free WQE, the tail, which no post takes:
// a freed WQE is linked after it, so the device, which has read the
// next index of every WQE it consumed, never meets a link that changes
// under it. The SRQ thus holds one receive less than its WQEs.
type sharedRecvQueue struct {
	ctx   *context
	k     kverbs.SRQ
	srqn  uint32
	buf   dmaBuf
	db    unsafe.Pointer // be32: receives posted, free-running
	cnt   uint32         // WQEs, a power of two
	shift uint32         // log2 of the WQE stride
	maxGS uint32         // SGEs a WQE holds

	// mu guards the free list, the counter and wrid: PostRecv takes WQEs
	// from the head while Poll, on another goroutine, gives them back at
	// the tail.
	mu      sync.Mutex
	head    uint32 // the next WQE to post
	tail    uint32 // the last free WQE, never posted
	counter uint32 // receives posted, free-running
	wrid    []uint64
}

// CreateSRQ sets up the WQE buffer and doorbell record (newSRQ), then
// creates the SRQ in the kernel with their addresses.
func (c *context) CreateSRQ(r kverbs.SRQReq) (provider.SRQ, error) {
	s, err := c.newSRQ(r.MaxWR, r.MaxSGE)
	if err != nil {
		return nil, err
	}
	// The kernel sizes the WQEs from max_sge and their number from max_wr
	// as this does: it is told what was made (every SGE that fits, one
	// receive less than the WQEs), so that the geometries agree. A basic
	// SRQ takes no user index.
	kr := r
	kr.MaxWR, kr.MaxSGE, kr.Limit = s.cnt-1, s.maxGS, 0
	req := uapi.Mlx5IBCreateSRQ{BufAddr: uapi.NewPointer(s.buf.ptr()), DbAddr: uapi.NewPointer(s.db)}
	var resp uapi.Mlx5IBCreateSRQResp
	if s.k, err = kverbs.CreateSRQ(c.conn, kr, bytesOf(&req), bytesOf(&resp)); err != nil {
		s.free()
		return nil, err
	}
	s.srqn = resp.Srqn
	c.setSRQ(s.k.Handle, s)
	// mlx5_ib ignores the create's limit; it is armed as rxe arms it.
	if r.Limit != 0 {
		if err := s.Modify(kverbs.SRQLimit, kverbs.SRQAttr{Limit: r.Limit}); err != nil {
			s.Destroy()
			return nil, err
		}
	}
	return s, nil
}

// newSRQ sizes and allocates an SRQ's WQE buffer and doorbell record,
// and links every WQE into the free list: WQE i to i+1, the last to 0,
// with the head at 0 and the tail at the last, as the device expects of
// a new SRQ.
func (c *context) newSRQ(maxWR, maxSGE uint32) (*sharedRecvQueue, error) {
	s := &sharedRecvQueue{ctx: c}
	if err := s.size(maxWR, maxSGE, &c.resp); err != nil {
		return nil, err
	}
	var err error
	if s.buf, err = allocDMA(int(s.cnt << s.shift)); err != nil {
		return nil, err
	}
	if s.db, err = c.dbs.get(); err != nil {
		s.buf.free()
		return nil, err
	}
	s.wrid = make([]uint64, s.cnt)
	s.head, s.tail = 0, s.cnt-1
	for i := uint32(0); i < s.cnt; i++ {
		be.PutUint16(s.wqe(i)[srqNextIndex:], uint16((i+1)&(s.cnt-1)))
	}
	return s, nil
}

// size works out the WQE stride and count as mlx5_ib_create_srq does,
// within the device's limits.
func (s *sharedRecvQueue) size(maxWR, maxSGE uint32, dev *uapi.Mlx5IBAllocUcontextResp) error {
	if maxWR == 0 || maxSGE == 0 {
		return fmt.Errorf("mlx5 SRQ of %d receives of %d SGEs: %w", maxWR, maxSGE, unix.EINVAL)
	}
	if dev.MaxSRQRecvWR != 0 && maxWR >= dev.MaxSRQRecvWR {
		return fmt.Errorf("mlx5 SRQ of %d receives, the device takes fewer than %d: %w", maxWR, dev.MaxSRQRecvWR, unix.EINVAL)
	}
	if maxWR >= 1<<30 || maxSGE > 1<<20 {
		return fmt.Errorf("mlx5 SRQ of %d receives of %d SGEs: %w", maxWR, maxSGE, unix.EINVAL)
	}
	stride := max(roundPow2(srqNextSize+maxSGE*dataSize), srqMinStride)
	if dev.MaxRqDescSz != 0 && stride > uint32(dev.MaxRqDescSz) {
		return fmt.Errorf("mlx5 SRQ: %d SGEs make WQEs of %d bytes, the device takes %d: %w", maxSGE, stride, dev.MaxRqDescSz, unix.EINVAL)
	}
	s.cnt = roundPow2(maxWR + 1)
	s.shift = uint32(bits.TrailingZeros32(stride))
	s.maxGS = (stride - srqNextSize) / dataSize
	return nil
}

// wqe returns WQE i.
func (s *sharedRecvQueue) wqe(i uint32) []byte {
	off := uintptr(i) << s.shift
	return s.buf[off : off+1<<s.shift]
}

// Handle returns the kernel handle.
func (s *sharedRecvQueue) Handle() uint32 { return s.k.Handle }

// SRQN returns the SRQ's number, from the driver's response.
func (s *sharedRecvQueue) SRQN() uint32 { return s.srqn }

// MaxWR returns how many receives the SRQ holds: its WQEs less the one
// the free list keeps.
func (s *sharedRecvQueue) MaxWR() uint32 { return s.cnt - 1 }

// MaxSGE returns the most SGEs a receive takes: every one that fits its
// WQE, at least what was asked.
func (s *sharedRecvQueue) MaxSGE() uint32 { return s.maxGS }

// PostRecv takes a WQE from the free list's head for each request,
// writes its data segments and wr_id, then publishes the new count in
// the doorbell record; the device needs no MMIO write.
func (s *sharedRecvQueue) PostRecv(wrs []provider.RecvWR) (int, error) {
	s.mu.Lock()
	if s.buf == nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("mlx5 SRQ released: %w", unix.EINVAL)
	}
	base := unsafe.Pointer(unsafe.SliceData(s.buf))
	n := 0
	for ; n < len(wrs); n++ {
		wr := &wrs[n]
		if uint32(len(wr.SGL)) > s.maxGS || s.head == s.tail {
			break
		}
		w := unsafe.Add(base, uintptr(s.head)<<s.shift)
		next := uint32(loadBE16(unsafe.Add(w, srqNextIndex)))
		d := unsafe.Add(w, srqNextSize)
		j := uint32(0)
		for _, g := range wr.SGL {
			if g.Length == 0 {
				continue // the device takes no empty segment
			}
			storeBE64(unsafe.Add(d, dataByteCount), uint64(g.Length)<<32|uint64(g.LKey))
			storeBE64(unsafe.Add(d, dataAddr), g.Addr)
			d = unsafe.Add(d, dataSize)
			j++
		}
		if j < s.maxGS {
			storeBE64(unsafe.Add(d, dataByteCount), invalidLKey)
			storeBE64(unsafe.Add(d, dataAddr), 0)
		}
		s.wrid[s.head] = wr.WRID
		s.head = next & (s.cnt - 1)
	}
	if n > 0 {
		s.counter += uint32(n)
		dmaFence()
		storeBE32(s.db, s.counter)
	}
	var err error
	if n < len(wrs) {
		err = s.postErr(wrs, n)
	}
	s.mu.Unlock()
	return n, err
}

// postErr says why PostRecv stopped at request i.
//
//go:noinline
func (s *sharedRecvQueue) postErr(wrs []provider.RecvWR, i int) error {
	if k := len(wrs[i].SGL); uint32(k) > s.maxGS {
		return fmt.Errorf("work request %d: %d SGEs, the SRQ takes %d: %w", i, k, s.maxGS, unix.EINVAL)
	}
	return fmt.Errorf("work request %d: shared receive queue full (%d entries): %w", i, s.cnt-1, unix.ENOMEM)
}

// complete returns the wr_id of the WQE at index ctr, which a receive
// completion named, and links the WQE back after the tail: it is free
// again. Poll calls it, for successful and error completions alike.
func (s *sharedRecvQueue) complete(ctr uint16) uint64 {
	s.mu.Lock()
	i := uint32(ctr) & (s.cnt - 1)
	id := s.wrid[i]
	if s.buf != nil {
		be.PutUint16(s.wqe(s.tail)[srqNextIndex:], uint16(i))
		s.tail = i
	}
	s.mu.Unlock()
	return id
}

// Modify arms the limit event (kverbs.SRQLimit). mlx5_ib refuses to
// resize an SRQ (mlx5_ib_modify_srq: EINVAL for IB_SRQ_MAX_WR), so a
// resize is refused here, without asking the kernel.
func (s *sharedRecvQueue) Modify(mask uint32, a kverbs.SRQAttr) error {
	if mask&kverbs.SRQMaxWR != 0 {
		return fmt.Errorf("resizing an mlx5 SRQ (mlx5_ib cannot): %w", errs.ErrNotSupported)
	}
	return kverbs.ModifySRQ(s.ctx.conn, s.k.Handle, mask, a, nil)
}

// Destroy destroys the SRQ in the kernel, then frees its buffer and
// doorbell record.
func (s *sharedRecvQueue) Destroy() (uint32, error) {
	n, err := kverbs.DestroySRQ(s.ctx.conn, s.k.Handle)
	if err != nil {
		return 0, err
	}
	s.Release()
	return n, nil
}

// Release forgets the SRQ and frees its buffer and doorbell record; the
// kernel destroyed the SRQ (with its context, or Destroy).
func (s *sharedRecvQueue) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buf == nil {
		return
	}
	s.ctx.setSRQ(s.k.Handle, nil)
	s.ctx.dropGhosts(s)
	s.free()
}

func (s *sharedRecvQueue) free() {
	s.buf.free()
	s.buf = nil
	if s.db != nil {
		s.ctx.dbs.put(s.db)
		s.db = nil
	}
}

// loadBE16 reads a big-endian 16-bit value at p.
func loadBE16(p unsafe.Pointer) uint16 {
	b := (*[2]byte)(p)
	return uint16(b[0])<<8 | uint16(b[1])
}

// setSRQ publishes an SRQ under its kernel handle (nil: forgets it), for
// CreateQP to find the SRQ a QP receives through.
func (c *context) setSRQ(handle uint32, s *sharedRecvQueue) {
	c.qpMu.Lock()
	defer c.qpMu.Unlock()
	if s == nil {
		delete(c.srqs, handle)
		return
	}
	if c.srqs == nil {
		c.srqs = map[uint32]*sharedRecvQueue{}
	}
	c.srqs[handle] = s
}

// dropGhosts removes the stand-ins of s's destroyed QPs from the QP table
// (ghostOf): s is gone, and their stale completions with it.
func (c *context) dropGhosts(s *sharedRecvQueue) {
	c.qpMu.Lock()
	defer c.qpMu.Unlock()
	old := c.qps.Load()
	if old == nil {
		return
	}
	m := map[uint32]*queuePair{}
	for k, v := range *old {
		if !v.gone || v.srq != s {
			m[k] = v
		}
	}
	if len(m) != len(*old) {
		c.qps.Store(&m)
	}
}

// srqByHandle returns the SRQ of a kernel handle, or nil.
func (c *context) srqByHandle(handle uint32) *sharedRecvQueue {
	c.qpMu.Lock()
	defer c.qpMu.Unlock()
	return c.srqs[handle]
}
