package mlx5model

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// Shared receive queues: the kernel's side (mlx5_ib_create_srq for a user
// SRQ, its modify, query and destroy, and the core's use count) and the
// HCA's (the linked WQEs taken in list order, the limit event).

// The async events about SRQs and their QPs (enum ib_event_type).
const (
	eventSRQLimitReached  = 15
	eventQPLastWQEReached = 16
)

// srqNextSize is the next segment that starts every SRQ WQE (struct
// mlx5_wqe_srq_next_seg); its be16 next_wqe_index is at byte 2.
const srqNextSize = int(unsafe.Sizeof(uapi.Mlx5WqeSRQNextSeg{}))

// srq is a shared receive queue: the provider's WQE buffer and doorbell
// record, the kernel's attributes, the HCA's place in the list.
type srq struct {
	ctx    *Context
	handle uint32
	srqn   uint32
	user   uint64
	pd     *pd
	buf    unsafe.Pointer
	db     unsafe.Pointer // be32: receives posted (the low 16 bits count)
	cnt    uint32         // WQEs, a power of two
	shift  uint32         // log2 of the WQE stride
	maxGS  uint32         // max_sge as asked: what QUERY_SRQ reports
	refs   int            // QPs receiving through it (the core's usecnt)
	asyncs uint32

	// The limit (lwm): armed by MODIFY_SRQ, fired once.
	limit uint32
	armed bool

	// HCA state.
	dead bool   // its memory was unmapped (see Device.fault)
	head uint32 // the WQE it takes next: the last taken's next_wqe_index
	ci   uint32 // WQEs taken, free-running
}

type srqReq struct {
	pd            uint32
	user          uint64
	maxWR, maxSGE uint32
}

func srqCreateIoctl(a *args) unix.Errno {
	if a.val(uapi.UVERBS_ATTR_CREATE_SRQ_TYPE) != uapi.IB_UVERBS_SRQT_BASIC {
		return unix.EOPNOTSUPP // XRC and tag-matching SRQs are not modelled
	}
	if a.has(uapi.UVERBS_ATTR_CREATE_SRQ_EVENT_FD) {
		return unix.EOPNOTSUPP // events go to the default async fd only
	}
	in, ok := a.in(uapi.UVERBS_ATTR_UHW_IN)
	if !ok {
		return unix.EFAULT
	}
	s, out, e := a.c.createSRQ(srqReq{
		pd:     uint32(a.val(uapi.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE)),
		user:   a.val(uapi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE),
		maxWR:  uint32(a.val(uapi.UVERBS_ATTR_CREATE_SRQ_MAX_WR)),
		maxSGE: uint32(a.val(uapi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE)),
	}, in, max(a.outLen(uapi.UVERBS_ATTR_UHW_OUT), 0))
	if e != 0 {
		return e
	}
	a.setNew(uapi.UVERBS_ATTR_CREATE_SRQ_HANDLE, uint64(s.handle))
	a.out(uapi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, u32b(s.cnt-1))
	a.out(uapi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, u32b(s.maxGS))
	// RESP_SRQ_NUM is left unwritten: the core answers it for an XRC SRQ
	// alone; a basic SRQ's number is in the driver's response.
	a.out(uapi.UVERBS_ATTR_UHW_OUT, out)
	return 0
}

// createSRQ is the core's create_srq and mlx5_ib_create_srq for a basic
// user SRQ: max_wr and max_sge checked against the device, the WQEs sized
// as the kernel sizes them (the provider must have laid its buffer out
// alike), the driver data read and checked. The srq_limit of a create is
// ignored, as mlx5_ib ignores it.
func (c *Context) createSRQ(r srqReq, uhw []byte, uhwOutLen int) (*srq, []byte, unix.Errno) {
	d := c.d
	p := c.pdByHandle(r.pd)
	if p == nil {
		return nil, nil, unix.EINVAL
	}
	// mlx5_ib_create_srq: max_wr below 2^log_max_srq_sz, max_sge within
	// max_wqe_sz_rq.
	if r.maxWR >= maxQPWR || r.maxSGE > maxRqDesc/uint32(dataSegSize) {
		return nil, nil, unix.EINVAL
	}
	cnt := uint32(roundPow2(uint64(r.maxWR) + 1))
	desc := max(uint32(roundPow2(uint64(srqNextSize)+uint64(r.maxSGE)*uint64(dataSegSize))), 32)
	shift := uint32(0)
	for 1<<shift < desc {
		shift++
	}
	// create_srq_user: the driver data, zero-extended when shorter;
	// reserved words and bytes past the struct must be zero; the user
	// index is read for XRC and tag-matching SRQs only; flags other than
	// the signature's are not looked at.
	req := view[uapi.Mlx5IBCreateSRQ](uhw)
	if req.Reserved0 != 0 || req.Reserved1 != 0 {
		return nil, nil, unix.EINVAL
	}
	if len(uhw) > int(unsafe.Sizeof(uapi.Mlx5IBCreateSRQ{})) {
		for _, b := range uhw[unsafe.Sizeof(uapi.Mlx5IBCreateSRQ{}):] {
			if b != 0 {
				return nil, nil, unix.EINVAL // ib_is_udata_cleared
			}
		}
	}
	if req.Flags&^uapi.MLX5_SRQ_FLAG_SIGNATURE != 0 {
		d.violate("create srq: flags %#x: mlx5_ib knows only MLX5_SRQ_FLAG_SIGNATURE", req.Flags)
	}
	if req.Flags&uapi.MLX5_SRQ_FLAG_SIGNATURE != 0 {
		return nil, nil, unix.EOPNOTSUPP // WQE signatures are not modelled
	}
	if req.UIDX != 0 {
		d.violate("create srq: user index %#x for a basic SRQ, which takes none", req.UIDX)
	}
	buf, db := ptrOf(&req.BufAddr), ptrOf(&req.DbAddr)
	size := uint64(cnt) << shift
	// ib_umem_get and the quantized page offset (64-byte units), then
	// mlx5_ib_db_map_user.
	if buf == nil || uintptr(buf)%64 != 0 || db == nil || uintptr(db)%4 != 0 {
		return nil, nil, unix.EINVAL
	}
	if !mapped(buf, size) || !mapped(db, 4) {
		return nil, nil, unix.EFAULT
	}
	if v := load32BE(db); v != 0 {
		d.violate("create srq: doorbell record not zeroed (%#x)", v)
	}
	s := &srq{ctx: c, user: r.user, pd: p, buf: buf, db: db, cnt: cnt, shift: shift, maxGS: r.maxSGE}
	// The device takes the WQEs in list order from WQE 0, as the kernel's
	// own SRQs link them (create_srq_kernel): the provider must have
	// linked every WQE to the next.
	for i := uint32(0); i < cnt; i++ {
		if n := s.next(i); n != (i+1)&(cnt-1) {
			d.violate("create srq: WQE %d links to %d, want %d: the free list must start in index order", i, n, (i+1)&(cnt-1))
			break
		}
	}
	s.srqn = d.nextSRQN
	d.nextSRQN++
	s.handle = c.newHandle(s)
	p.refs++
	resp := uapi.Mlx5IBCreateSRQResp{Srqn: s.srqn}
	var out []byte
	if uhwOutLen > 0 {
		out = structBytes(&resp)
	}
	return s, out, 0
}

func srqDestroyIoctl(a *args) unix.Errno {
	n, e := a.c.destroySRQHandle(uint32(a.val(uapi.UVERBS_ATTR_DESTROY_SRQ_HANDLE)))
	if e != 0 {
		return e
	}
	r := uapi.IBUverbsDestroySRQResp{EventsReported: n}
	a.out(uapi.UVERBS_ATTR_DESTROY_SRQ_RESP, structBytes(&r))
	return 0
}

// destroySRQHandle is ib_destroy_srq_user: EBUSY while a QP receives
// through the SRQ.
func (c *Context) destroySRQHandle(h uint32) (uint32, unix.Errno) {
	s, ok := c.handles[h].(*srq)
	if !ok {
		return 0, unix.EINVAL
	}
	if s.refs > 0 {
		return 0, unix.EBUSY
	}
	return c.destroySRQ(s), 0
}

// destroySRQ forgets an SRQ; it returns the async events about it that
// the application read.
func (c *Context) destroySRQ(s *srq) uint32 {
	n := s.asyncs
	if c.async != nil {
		n -= uint32(c.async.unread(eventKey{3, s.user}))
	}
	delete(c.handles, s.handle)
	s.pd.refs--
	s.buf, s.db = nil, nil
	return n
}

// modifySRQ is mlx5_ib_modify_srq: no resize; a limit below the WQEs
// arms the limit event.
func (c *Context) modifySRQ(m *uapi.IBUverbsModifySRQ) unix.Errno {
	s, ok := c.handles[m.SRQHandle].(*srq)
	if !ok {
		return unix.EINVAL
	}
	if m.AttrMask&1 != 0 { // IB_SRQ_MAX_WR
		return unix.EINVAL
	}
	if m.AttrMask&2 != 0 { // IB_SRQ_LIMIT
		if m.SRQLimit >= s.cnt {
			return unix.EINVAL
		}
		s.limit, s.armed = m.SRQLimit, true
	}
	return 0
}

// querySRQ is mlx5_ib_query_srq: the limit reads 0 once the event fired.
func (c *Context) querySRQ(h uint32) (uapi.IBUverbsQuerySRQResp, unix.Errno) {
	s, ok := c.handles[h].(*srq)
	if !ok {
		return uapi.IBUverbsQuerySRQResp{}, unix.EINVAL
	}
	r := uapi.IBUverbsQuerySRQResp{MaxWR: s.cnt - 1, MaxSGE: s.maxGS}
	if s.armed {
		r.SRQLimit = s.limit
	}
	return r, 0
}

// wqe returns WQE i.
func (s *srq) wqe(i uint32) []byte {
	return bytesAt(unsafe.Add(s.buf, uintptr(i&(s.cnt-1))<<s.shift), 1<<s.shift)
}

// next returns WQE i's next_wqe_index.
func (s *srq) next(i uint32) uint32 { return uint32(be.Uint16(s.wqe(i)[2:])) }

// avail returns how many posted WQEs the HCA has not taken: the doorbell
// record's count less its own.
func (s *srq) avail() uint32 {
	if s.db == nil || s.dead {
		return 0
	}
	return (load32BE(s.db) - s.ci) & 0xffff
}

// peek returns the data segments of the WQE the HCA takes next and its
// index, without taking it.
func (s *srq) peek() ([]byte, uint16) {
	return s.wqe(s.head)[srqNextSize:], uint16(s.head)
}

// take consumes the WQE peek returned: the HCA goes on to the WQE it
// links to. Then, if the limit is armed and fewer WQEs than it are left,
// the limit event fires, once.
func (d *Device) take(s *srq) {
	n := s.next(s.head)
	if n >= s.cnt {
		d.violate("SRQ %#x: WQE %d links to %d, past its %d WQEs", s.srqn, s.head, n, s.cnt)
	}
	s.head = n & (s.cnt - 1)
	s.ci++
	if s.armed && s.avail() < s.limit {
		s.armed = false
		if s.ctx.asyncEvent(s.user, eventSRQLimitReached, eventKey{3, s.user}) {
			s.asyncs++
		}
	}
}
