package mlx5model

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// QP states (enum ib_qp_state).
const (
	qpsReset = iota
	qpsInit
	qpsRTR
	qpsRTS
	qpsSQD
	qpsSQE
	qpsErr
)

// QP attribute mask bits (enum ib_qp_attr_mask).
const (
	maskState = 1 << iota
	maskCurState
	maskEnSQDAsyncNotify
	maskAccessFlags
	maskPKeyIndex
	maskPort
	maskQKey
	maskAV
	maskPathMTU
	maskTimeout
	maskRetryCnt
	maskRNRRetry
	maskRQPSN
	maskMaxQPRdAtomic
	maskAltPath
	maskMinRNRTimer
	maskSQPSN
	maskMaxDestRdAtomic
	maskPathMigState
	maskCap
	maskDestQPN
)

// qp is a queue pair: the provider's rings and doorbell record, the
// kernel's attributes, the HCA's consumer indices.
type qp struct {
	ctx      *Context
	handle   uint32
	qpn      uint32
	user     uint64
	typ      uint8
	pd       *pd
	scq, rcq *cq
	sigAll   bool
	cap      uapi.IBUverbsQPCap
	uidx     uint32
	uar      *uar // where its send doorbells ring
	srq      *srq // where its receives come from (it then has no receive queue)

	buf     unsafe.Pointer // the RQ, then the SQ
	rqCnt   uint32
	rqShift uint32
	sqCnt   uint32 // basic blocks
	sq      unsafe.Pointer
	db      unsafe.Pointer // doorbell record: be32 receive counter, be32 send counter

	// Attributes (MODIFY_QP).
	state, port, mtu                  uint8
	pkey                              uint16
	qkey, access, destQPN             uint32
	rqPSN, sqPSN                      uint32
	maxRd, maxDestRd, minRNR, timeout uint8
	retry, rnrRetry                   uint8
	av                                uapi.IBUverbsQPDest

	// HCA state.
	dead       bool   // its memory was unmapped (see Device.fault)
	everUp     bool   // it left RESET once
	sqCI, rqCI uint32 // send basic blocks and receive WQEs consumed, free-running
	bellIdx    uint16 // the WQE the last doorbell named
	bellValid  bool
	sweep      bool      // run to the doorbell record (coalesced doorbells, errors)
	dbSince    time.Time // when the send record moved with no doorbell
	rnrWait    bool
	umrFence   bool // the last WQE executed was a UMR: the next must carry a fence
	rnrSince   time.Time
	scratch    []byte
	asyncs     uint32
}

type qpReq struct {
	pd, send, recv uint32
	srq            uint32
	hasSRQ         bool
	user           uint64
	typ            uint8
	sigAll         bool
	cap            uapi.IBUverbsQPCap
}

func qpCreateIoctl(a *args) unix.Errno {
	if a.has(uapi.UVERBS_ATTR_CREATE_QP_XRCD_HANDLE) ||
		a.has(uapi.UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE) || a.has(uapi.UVERBS_ATTR_CREATE_QP_SOURCE_QPN) ||
		a.has(uapi.UVERBS_ATTR_CREATE_QP_EVENT_FD) {
		return unix.EOPNOTSUPP // not modelled
	}
	for _, id := range []uint16{uapi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, uapi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE,
		uapi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE} {
		if !a.has(id) {
			return unix.EINVAL
		}
	}
	capIn, ok := a.in(uapi.UVERBS_ATTR_CREATE_QP_CAP)
	if !ok {
		return unix.EFAULT
	}
	flags := a.val(uapi.UVERBS_ATTR_CREATE_QP_FLAGS)
	if flags&^uapi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL != 0 {
		return unix.EOPNOTSUPP
	}
	r := qpReq{
		pd:     uint32(a.val(uapi.UVERBS_ATTR_CREATE_QP_PD_HANDLE)),
		send:   uint32(a.val(uapi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE)),
		recv:   uint32(a.val(uapi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE)),
		user:   a.val(uapi.UVERBS_ATTR_CREATE_QP_USER_HANDLE),
		typ:    uint8(a.val(uapi.UVERBS_ATTR_CREATE_QP_TYPE)),
		sigAll: flags&uapi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL != 0,
		cap:    *view[uapi.IBUverbsQPCap](capIn),
		srq:    uint32(a.val(uapi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE)),
		hasSRQ: a.has(uapi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE),
	}
	in, ok := a.in(uapi.UVERBS_ATTR_UHW_IN)
	if !ok {
		return unix.EFAULT
	}
	q, out, e := a.c.createQP(r, in, max(a.outLen(uapi.UVERBS_ATTR_UHW_OUT), 0))
	if e != 0 {
		return e
	}
	a.setNew(uapi.UVERBS_ATTR_CREATE_QP_HANDLE, uint64(q.handle))
	a.out(uapi.UVERBS_ATTR_CREATE_QP_RESP_CAP, structBytes(&q.cap))
	a.out(uapi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, u32b(q.qpn))
	a.out(uapi.UVERBS_ATTR_UHW_OUT, out)
	return 0
}

func isPow2(n uint32) bool { return n != 0 && n&(n-1) == 0 }

// createQP is the core's create_qp and mlx5_ib_create_qp for a user QP.
func (c *Context) createQP(r qpReq, uhw []byte, uhwOutLen int) (*qp, []byte, unix.Errno) {
	d := c.d
	switch r.typ {
	case uapi.IB_UVERBS_QPT_RC, uapi.IB_UVERBS_QPT_UC, uapi.IB_UVERBS_QPT_UD:
	default:
		return nil, nil, unix.EOPNOTSUPP
	}
	p := c.pdByHandle(r.pd)
	scq, _ := c.handles[r.send].(*cq)
	rcq, _ := c.handles[r.recv].(*cq)
	if p == nil || scq == nil || rcq == nil {
		return nil, nil, unix.EINVAL
	}
	var sq *srq
	if r.hasSRQ {
		if sq, _ = c.handles[r.srq].(*srq); sq == nil {
			return nil, nil, unix.EINVAL
		}
	}
	cp := r.cap
	if cp.MaxSendWR > maxQPWR || cp.MaxRecvWR > maxQPWR || cp.MaxSendSGE > maxSGE || cp.MaxRecvSGE > maxSGE ||
		cp.MaxInlineData > maxInline {
		return nil, nil, unix.EINVAL
	}
	if sq != nil {
		// set_rq_size: a QP on an SRQ has no receive queue, whatever
		// the caps and the driver data say.
		cp.MaxRecvWR, cp.MaxRecvSGE = 0, 0
	}
	const minIn = int(unsafe.Offsetof(uapi.Mlx5IBCreateQP{}.SqBufAddr))
	if len(uhw) < minIn {
		return nil, nil, unix.EINVAL
	}
	req := view[uapi.Mlx5IBCreateQP](uhw)
	if req.Flags&uapi.MLX5_QP_FLAG_SCATTER_CQE != 0 {
		d.violate("create qp: the provider asked for scatter-to-CQE (MLX5_QP_FLAG_SCATTER_CQE): goverbs must never")
		return nil, nil, unix.EINVAL
	}
	const knownFlags = uapi.MLX5_QP_FLAG_UAR_PAGE_INDEX | uapi.MLX5_QP_FLAG_SIGNATURE | uapi.MLX5_QP_FLAG_BFREG_INDEX
	if req.Flags&^knownFlags != 0 {
		return nil, nil, unix.EOPNOTSUPP // flags the model does not do (tunnels, DC, raw packet, …)
	}
	if req.Flags&uapi.MLX5_QP_FLAG_SIGNATURE != 0 {
		return nil, nil, unix.EOPNOTSUPP
	}
	if req.SqWqeCount != 0 && !isPow2(req.SqWqeCount) || req.SqWqeCount > maxQPWR {
		return nil, nil, unix.EINVAL
	}
	if req.RqWqeCount != 0 && (!isPow2(req.RqWqeCount) || req.RqWqeCount > maxQPWR) {
		return nil, nil, unix.EINVAL
	}
	if req.RqWqeCount != 0 && (req.RqWqeShift < 4 || req.RqWqeShift > 31) {
		return nil, nil, unix.EINVAL
	}
	if sq != nil && req.RqWqeCount != 0 {
		d.violate("create qp: %d receive WQEs for a QP on an SRQ: mlx5_ib ignores them and puts the send queue at the buffer's start", req.RqWqeCount)
		req.RqWqeCount = 0
	}
	// The kernel takes the provider's geometry on trust; the model checks
	// that it holds what the QP promises, as the device would overflow.
	if req.SqWqeCount < cp.MaxSendWR {
		d.violate("create qp: %d send basic blocks for %d send WRs", req.SqWqeCount, cp.MaxSendWR)
	}
	if req.RqWqeCount < cp.MaxRecvWR {
		d.violate("create qp: %d receive WQEs for %d receive WRs", req.RqWqeCount, cp.MaxRecvWR)
	}
	if cp.MaxRecvWR > 0 && (1<<req.RqWqeShift)/uint32(dataSegSize) < cp.MaxRecvSGE {
		d.violate("create qp: receive WQEs of %d bytes for %d SGEs", 1<<req.RqWqeShift, cp.MaxRecvSGE)
	}
	if req.SqBufAddr != 0 || req.EceOptions != 0 {
		d.violate("create qp: sq_buf_addr %#x, ece_options %#x: both are for other QP kinds", req.SqBufAddr, req.EceOptions)
	}
	uidx := req.UIDX
	if c.cqeVersion == 0 {
		if uidx != 0xffffff {
			d.violate("create qp: user index %#x with cqe_version 0 (want 0xffffff)", uidx)
		}
	} else {
		if uidx > 0xffffff {
			return nil, nil, unix.EINVAL
		}
		if uidx == 0xffffff {
			d.violate("create qp: user index 0xffffff with cqe_version 1: its CQEs name no QP")
		} else if o := c.uidxs[uidx]; o != nil {
			d.violate("create qp: user index %#x already belongs to QP %#x", uidx, o.qpn)
		}
	}
	var u *uar
	var bfreg uint32
	switch {
	case req.Flags&uapi.MLX5_QP_FLAG_UAR_PAGE_INDEX != 0:
		if u = c.uarByPageID(req.BfregIndex); u == nil {
			return nil, nil, unix.EINVAL
		}
	case c.dynUAR:
		return nil, nil, unix.EINVAL // alloc_bfreg: a dynamic-UAR context has no static registers
	default:
		if c.bfregs < 2 {
			return nil, nil, unix.ENOMEM
		}
		// Like alloc_bfreg: a medium-latency register, shared, never 0.
		medium := c.bfregs - c.lowLat - 1
		if medium == 0 {
			return nil, nil, unix.ENOMEM
		}
		bfreg = 1 + c.lowLat + c.nextBfreg%medium
		c.nextBfreg++
		u = c.static[bfreg/bfRegsPerUAR]
	}
	buf, db := ptrOf(&req.BufAddr), ptrOf(&req.DbAddr)
	rqBytes := uint64(req.RqWqeCount) << req.RqWqeShift
	if req.RqWqeCount == 0 {
		rqBytes = 0
	}
	size := rqBytes + uint64(req.SqWqeCount)*wqeBB
	if buf == nil || uintptr(buf)%64 != 0 || db == nil || uintptr(db)%4 != 0 {
		return nil, nil, unix.EINVAL
	}
	if !mapped(buf, max(size, 1)) || !mapped(db, 8) {
		return nil, nil, unix.EFAULT
	}
	if rx, tx := load32BE(db), load32BE(unsafe.Add(db, 4)); rx != 0 || tx != 0 {
		d.violate("create qp: doorbell record not zeroed (%#x %#x)", rx, tx)
	}
	q := &qp{ctx: c, user: r.user, typ: r.typ, pd: p, scq: scq, rcq: rcq, sigAll: r.sigAll, cap: cp, uidx: uidx,
		uar: u, srq: sq, buf: buf, rqCnt: req.RqWqeCount, rqShift: req.RqWqeShift, sqCnt: req.SqWqeCount,
		sq: unsafe.Add(buf, uintptr(rqBytes)), db: db, port: 1}
	q.qpn = d.nextQPN
	d.nextQPN++
	d.qps[q.qpn] = q
	q.handle = c.newHandle(q)
	if c.cqeVersion == 1 {
		c.uidxs[uidx] = q
	}
	p.refs++
	scq.refs++
	rcq.refs++
	if sq != nil {
		sq.refs++
	}
	resp := uapi.Mlx5IBCreateQPResp{BfregIndex: bfreg}
	var out []byte
	if uhwOutLen > 0 {
		out = structBytes(&resp)
	}
	return q, out, 0
}

func qpDestroyIoctl(a *args) unix.Errno {
	n, e := a.c.destroyQPHandle(uint32(a.val(uapi.UVERBS_ATTR_DESTROY_QP_HANDLE)))
	if e != 0 {
		return e
	}
	a.out(uapi.UVERBS_ATTR_DESTROY_QP_RESP, u32b(n))
	return 0
}

func (c *Context) destroyQPHandle(h uint32) (uint32, unix.Errno) {
	q, ok := c.handles[h].(*qp)
	if !ok {
		return 0, unix.EINVAL
	}
	return c.destroyQP(q), 0
}

// destroyQP forgets a QP; it returns the async events about it that the
// application read.
func (c *Context) destroyQP(q *qp) uint32 {
	n := q.asyncs
	if c.async != nil {
		n -= uint32(c.async.unread(eventKey{1, q.user}))
	}
	delete(c.handles, q.handle)
	delete(c.d.qps, q.qpn)
	if c.uidxs[q.uidx] == q {
		delete(c.uidxs, q.uidx)
	}
	q.pd.refs--
	q.scq.refs--
	q.rcq.refs--
	if q.srq != nil {
		q.srq.refs--
	}
	q.buf, q.sq, q.db = nil, nil, nil
	q.state = qpsReset
	return n
}

// transition says which attributes a state change requires and allows,
// per QP type (ib_modify_qp_is_ok's table, for RC, UC and UD).
type transition struct{ req, opt [3]uint32 } // RC, UC, UD

func typeIndex(t uint8) int {
	switch t {
	case uapi.IB_UVERBS_QPT_RC:
		return 0
	case uapi.IB_UVERBS_QPT_UC:
		return 1
	}
	return 2
}

var transitions = map[[2]uint8]transition{
	{qpsReset, qpsInit}: {
		req: [3]uint32{maskPKeyIndex | maskPort | maskAccessFlags, maskPKeyIndex | maskPort | maskAccessFlags, maskPKeyIndex | maskPort | maskQKey}},
	{qpsInit, qpsInit}: {
		opt: [3]uint32{maskPKeyIndex | maskPort | maskAccessFlags, maskPKeyIndex | maskPort | maskAccessFlags, maskPKeyIndex | maskPort | maskQKey}},
	{qpsInit, qpsRTR}: {
		req: [3]uint32{maskAV | maskPathMTU | maskDestQPN | maskRQPSN | maskMaxDestRdAtomic | maskMinRNRTimer,
			maskAV | maskPathMTU | maskDestQPN | maskRQPSN, 0},
		opt: [3]uint32{maskAltPath | maskAccessFlags | maskPKeyIndex, maskAltPath | maskAccessFlags | maskPKeyIndex,
			maskPKeyIndex | maskQKey}},
	{qpsRTR, qpsRTS}: {
		req: [3]uint32{maskSQPSN | maskTimeout | maskRetryCnt | maskRNRRetry | maskMaxQPRdAtomic, maskSQPSN, maskSQPSN},
		opt: [3]uint32{maskCurState | maskAltPath | maskAccessFlags | maskMinRNRTimer | maskPathMigState,
			maskCurState | maskAltPath | maskAccessFlags | maskPathMigState, maskCurState | maskQKey}},
	{qpsRTS, qpsRTS}: {
		opt: [3]uint32{maskCurState | maskAccessFlags | maskAltPath | maskPathMigState | maskMinRNRTimer,
			maskCurState | maskAccessFlags | maskAltPath | maskPathMigState, maskCurState | maskQKey}},
}

// modifyQP is ib_uverbs_modify_qp: the transition and its attributes
// checked as the kernel does, then applied.
func (c *Context) modifyQP(m *uapi.IBUverbsModifyQP) unix.Errno {
	q, ok := c.handles[m.QPHandle].(*qp)
	if !ok {
		return unix.EINVAL
	}
	mask := m.AttrMask
	if mask&^(1<<21-1) != 0 {
		return unix.EINVAL
	}
	cur := q.state
	if mask&maskCurState != 0 {
		if m.CurQPState > qpsErr {
			return unix.EINVAL
		}
		if m.CurQPState != q.state {
			return unix.EINVAL // the device refuses a transition from a state the QP is not in
		}
	}
	next := cur
	if mask&maskState != 0 {
		next = m.QPState
	}
	if next > qpsErr {
		return unix.EINVAL
	}
	ti := typeIndex(q.typ)
	switch {
	case next == qpsReset || next == qpsErr:
		if mask&^(maskState|maskCurState) != 0 {
			return unix.EINVAL
		}
	default:
		t, ok := transitions[[2]uint8{cur, next}]
		if !ok {
			return unix.EINVAL
		}
		if mask&t.req[ti] != t.req[ti] || mask&^(t.req[ti]|t.opt[ti]|maskState) != 0 {
			return unix.EINVAL
		}
	}
	if mask&maskPort != 0 && m.PortNum != 1 {
		return unix.EINVAL
	}
	if mask&maskPKeyIndex != 0 && m.PkeyIndex >= pkeyTableLen {
		return unix.EINVAL
	}
	if mask&maskPathMTU != 0 && (m.PathMTU < 1 || m.PathMTU > mtu4096) {
		return unix.EINVAL
	}
	if mask&maskMaxQPRdAtomic != 0 && m.MaxRdAtomic > maxRdAtom {
		return unix.EINVAL
	}
	if mask&maskMaxDestRdAtomic != 0 && m.MaxDestRdAtomic > maxRdAtom {
		return unix.EINVAL
	}
	if mask&maskAccessFlags != 0 && m.QPAccessFlags&^uint32(uapi.IB_UVERBS_ACCESS_LOCAL_WRITE|uapi.IB_UVERBS_ACCESS_REMOTE_WRITE|
		uapi.IB_UVERBS_ACCESS_REMOTE_READ|uapi.IB_UVERBS_ACCESS_REMOTE_ATOMIC|uapi.IB_UVERBS_ACCESS_MW_BIND) != 0 {
		return unix.EINVAL
	}
	if mask&maskAV != 0 {
		av := &m.Dest
		// RoCE: a GRH, a source GID of the port, a destination the kernel
		// can resolve to a MAC.
		if av.IsGlobal == 0 || int(av.SgidIndex) >= len(gids) || (av.PortNum != 0 && av.PortNum != 1) {
			return unix.EINVAL
		}
		if _, ok := resolveMAC(av.Dgid); !ok {
			return unix.EHOSTUNREACH
		}
	}
	if mask&maskDestQPN != 0 && m.DestQPNum > 0xffffff {
		return unix.EINVAL
	}
	// Apply.
	if mask&maskAccessFlags != 0 {
		q.access = m.QPAccessFlags
	}
	if mask&maskPKeyIndex != 0 {
		q.pkey = m.PkeyIndex
	}
	if mask&maskPort != 0 {
		q.port = m.PortNum
	}
	if mask&maskQKey != 0 {
		q.qkey = m.Qkey
	}
	if mask&maskAV != 0 {
		q.av = m.Dest
	}
	if mask&maskPathMTU != 0 {
		q.mtu = m.PathMTU
	}
	if mask&maskTimeout != 0 {
		q.timeout = m.Timeout
	}
	if mask&maskRetryCnt != 0 {
		q.retry = m.RetryCnt
	}
	if mask&maskRNRRetry != 0 {
		q.rnrRetry = m.RnrRetry
	}
	if mask&maskRQPSN != 0 {
		q.rqPSN = m.RqPSN & 0xffffff
	}
	if mask&maskSQPSN != 0 {
		q.sqPSN = m.SqPSN & 0xffffff
	}
	if mask&maskMaxQPRdAtomic != 0 {
		q.maxRd = m.MaxRdAtomic
	}
	if mask&maskMaxDestRdAtomic != 0 {
		q.maxDestRd = m.MaxDestRdAtomic
	}
	if mask&maskMinRNRTimer != 0 {
		q.minRNR = m.MinRnrTimer
	}
	if mask&maskDestQPN != 0 {
		q.destQPN = m.DestQPNum
	}
	switch {
	case next == qpsReset:
		q.everUp = q.everUp || cur != qpsReset
		// The device forgets the queues: consumer indices restart at 0,
		// as the provider's producers do.
		q.state = qpsReset
		q.sqCI, q.rqCI = 0, 0
		q.bellValid, q.sweep, q.rnrWait, q.umrFence = false, false, false, false
		q.dbSince = time.Time{}
	case next == qpsErr:
		c.d.qpError(q)
	default:
		if cur == qpsReset && next == qpsInit {
			// The device starts the queues at 0 again: a provider that
			// keeps its own counters would post where the device does not
			// look (rdma-core zeroes them and the record at RESET).
			if rx, tx := load32BE(q.db), load32BE(unsafe.Add(q.db, 4)); (rx != 0 || tx != 0) && q.everUp {
				c.d.violate("QP %#x: RESET to INIT with doorbell record %d/%d: the provider did not restart its queues at RESET", q.qpn, rx, tx)
			}
		}
		q.state = next
		if next == qpsRTS {
			q.sweep = q.bellValid // doorbells rung before RTS run now
		}
	}
	return 0
}

// queryQP answers QUERY_QP.
func (c *Context) queryQP(h uint32) (uapi.IBUverbsQueryQPResp, unix.Errno) {
	q, ok := c.handles[h].(*qp)
	if !ok {
		return uapi.IBUverbsQueryQPResp{}, unix.EINVAL
	}
	r := uapi.IBUverbsQueryQPResp{
		Dest:            q.av,
		MaxSendWR:       q.cap.MaxSendWR,
		MaxRecvWR:       q.cap.MaxRecvWR,
		MaxSendSGE:      q.cap.MaxSendSGE,
		MaxRecvSGE:      q.cap.MaxRecvSGE,
		MaxInlineData:   q.cap.MaxInlineData,
		Qkey:            q.qkey,
		RqPSN:           q.rqPSN,
		SqPSN:           q.sqPSN,
		DestQPNum:       q.destQPN,
		QPAccessFlags:   q.access,
		PkeyIndex:       q.pkey,
		QPState:         q.state,
		CurQPState:      q.state,
		PathMTU:         q.mtu,
		MaxRdAtomic:     q.maxRd,
		MaxDestRdAtomic: q.maxDestRd,
		MinRnrTimer:     q.minRNR,
		PortNum:         q.port,
		Timeout:         q.timeout,
		RetryCnt:        q.retry,
		RnrRetry:        q.rnrRetry,
	}
	if q.sigAll {
		r.SqSigAll = 1
	}
	return r, 0
}
