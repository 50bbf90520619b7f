package uverbs

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// QP is a queue pair (ibv_qp). It holds its PD and CQs alive.
// Safe for concurrent use.
type QP struct {
	pd             *PD
	p              provider.QP
	typ            QPType
	sendCQ, recvCQ *cq.CQ
	user           uint64
	handle         uint64 // the kernel user handle: async events name the QP by it

	// mu is held for reading by Modify and Query from their check of
	// closed until their command is answered, and for writing by Close:
	// the kernel reuses handle numbers, so no command may carry the
	// handle once Close has destroyed it. Lock order: the context's mu,
	// then mu, then sendMu, then recvMu.
	mu sync.RWMutex
	// closed is written only by Close, which holds mu, sendMu and recvMu,
	// so holding any one of them makes reading it safe.
	closed bool
	// stop is why the QP posts no more, nil while it may: ErrClosed once
	// the QP or its context is closed (Close, Context.Close), or
	// ErrDeviceFatal once the device failed (halt); it is written holding
	// sendMu and recvMu. Each post reads it under its own lock (the check
	// it always made, no atomic), and finds the context's fd and doorbell
	// pages there while it is nil (see Context.Close).
	stop error

	sendMu sync.Mutex // serialises PostSend and PostSendInline
	recvMu sync.Mutex // serialises PostRecv

	// PostSendInline's request, its SGE and its payload, guarded by
	// sendMu: in the QP, so that a post allocates nothing.
	inlineWR   [1]SendWR
	inlineSGE  [1]SGE
	inlineData []byte
}

// uverbs.SGE and provider.SGE share a layout (the SGLs of the requests
// below are read as the provider's).
var _ [0]struct{} = [unsafe.Sizeof(SGE{}) - unsafe.Sizeof(provider.SGE{})]struct{}{}

// SendWR, RecvWR, AH, MWBind, MW and MR are laid out so that the
// providers read the callers' requests as they are: a []SendWR is a
// []provider.SendWR, a []RecvWR a []provider.RecvWR, a *AH a
// *provider.AHRef, a *MWBind a *provider.MWBindRef (whose *MW and *MR
// are a *provider.MWRef and *provider.MRRef). Posting then
// copies nothing before the provider writes the ring. These lines compile
// only while the layouts agree (the field types are checked by the
// conversions in the tests).
var (
	_ [0]struct{} = [unsafe.Sizeof(SendWR{}) - unsafe.Sizeof(provider.SendWR{})]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.Opcode) - unsafe.Offsetof(provider.SendWR{}.Opcode)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.Flags) - unsafe.Offsetof(provider.SendWR{}.Flags)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.SGL) - unsafe.Offsetof(provider.SendWR{}.SGL)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.Imm) - unsafe.Offsetof(provider.SendWR{}.Imm)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.FlushType) - unsafe.Offsetof(provider.SendWR{}.FlushType)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.FlushLevel) - unsafe.Offsetof(provider.SendWR{}.FlushLevel)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.RemoteAddr) - unsafe.Offsetof(provider.SendWR{}.RemoteAddr)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.RKey) - unsafe.Offsetof(provider.SendWR{}.RKey)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.CompareAdd) - unsafe.Offsetof(provider.SendWR{}.CompareAdd)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.Swap) - unsafe.Offsetof(provider.SendWR{}.Swap)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.AH) - unsafe.Offsetof(provider.SendWR{}.AH)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.RemoteQPN) - unsafe.Offsetof(provider.SendWR{}.RemoteQPN)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.RemoteQKey) - unsafe.Offsetof(provider.SendWR{}.RemoteQKey)]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(RecvWR{}) - unsafe.Sizeof(provider.RecvWR{})]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(RecvWR{}.SGL) - unsafe.Offsetof(provider.RecvWR{}.SGL)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(AH{}.p)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(SendWR{}.Bind) - unsafe.Offsetof(provider.SendWR{}.Bind)]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(MWBind{}) - unsafe.Sizeof(provider.MWBindRef{})]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(MWBind{}.MR) - unsafe.Offsetof(provider.MWBindRef{}.MR)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(MWBind{}.Addr) - unsafe.Offsetof(provider.MWBindRef{}.Addr)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(MWBind{}.Length) - unsafe.Offsetof(provider.MWBindRef{}.Length)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(MWBind{}.Access) - unsafe.Offsetof(provider.MWBindRef{}.Access)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(MW{}.ref)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(MR{}.ref)]struct{}{}
)

// providerSendWRs and providerRecvWRs view the caller's requests as the
// provider's, whose layout is the same (checked above): the slice header
// is reinterpreted, not rebuilt with unsafe.Slice, whose overflow checks
// on a length the caller's slice already has cost every post.
func providerSendWRs(w []SendWR) []provider.SendWR {
	return *(*[]provider.SendWR)(unsafe.Pointer(&w))
}

func providerRecvWRs(w []RecvWR) []provider.RecvWR {
	return *(*[]provider.RecvWR)(unsafe.Pointer(&w))
}

// PostSend posts send work requests (ibv_post_send), in order, and rings
// the doorbell once. It returns how many were posted; on an error, the
// requests before the bad one are posted and the error names its index.
// A full send queue gives an error wrapping ENOMEM. The memory of inline
// requests may be reused when PostSend returns; other requests' memory
// must stay registered until their completion. Safe for concurrent use.
//
// A posted request is in the send queue for good: it completes, or is
// flushed, like any other. That holds when the doorbell fails too (rxe's
// is a system call; mlx5's cannot fail): the requests are then written
// and counted in n, as rdma-core's rxe_post_send leaves them, the error
// names them ("send doorbell after work requests 0 to 2: …"), and the
// next doorbell (any later PostSend) sends them at the latest. Posting
// them again would send them twice.
//
// Once the device has reported DEVICE_FATAL, PostSend posts nothing and
// returns an error wrapping ErrDeviceFatal: the device completes nothing
// more, and mlx5's doorbell would land in a page the kernel zapped.
func (q *QP) PostSend(wrs []SendWR) (int, error) {
	const op = "post send"
	// The lock is released by hand, not deferred: a deferred call costs
	// every post a closure's setup, its stores and an indirect call.
	// The send lock alone: the doorbell uses the context's fd (rxe) or
	// its mapped doorbell page (mlx5), which Context.Close keeps until it
	// has set every live QP's stop under the QP's locks. So a post
	// either ends first or finds stop set, with no lock or flag of the
	// context's read on the way (its read lock would put two locked
	// instructions in every post). A DEVICE_FATAL sets stop the same way.
	q.sendMu.Lock()
	if q.stop != nil {
		return 0, q.stopped(op, &q.sendMu)
	}
	n, err := q.p.PostSend(providerSendWRs(wrs))
	q.sendMu.Unlock()
	if err != nil {
		return n, q.pd.ctx.opErr(op, err)
	}
	return n, nil
}

// PostRecv posts receive work requests (ibv_post_recv), in order, with no
// system call. It returns how many were posted; on an error, the requests
// before the bad one are posted and the error names its index. Safe for
// concurrent use. Once the device has reported DEVICE_FATAL, it posts
// nothing and returns an error wrapping ErrDeviceFatal.
func (q *QP) PostRecv(wrs []RecvWR) (int, error) {
	const op = "post recv"
	q.recvMu.Lock() // released by hand, as in PostSend
	if q.stop != nil {
		return 0, q.stopped(op, &q.recvMu)
	}
	n, err := q.p.PostRecv(providerRecvWRs(wrs))
	q.recvMu.Unlock()
	if err != nil {
		return n, q.pd.ctx.opErr(op, err)
	}
	return n, nil
}

// NewQP creates a queue pair in the PD (ibv_create_qp). Its CQs must come
// from the same Context.
func (p *PD) NewQP(cfg QPConfig) (*QP, error) {
	const op = "create qp"
	ctx := p.ctx
	if cfg.SendCQ == nil || cfg.RecvCQ == nil {
		return nil, ctx.opErr(op, fmt.Errorf("a send CQ and a receive CQ are required: %w", unix.EINVAL))
	}
	switch cfg.Type {
	case RC, UC, UD:
	default:
		return nil, ctx.opErr(op, fmt.Errorf("QP type %v: %w", cfg.Type, unix.EINVAL))
	}
	var cqHandles [2]uint32 // send, receive
	for i, q := range []*cq.CQ{cfg.SendCQ, cfg.RecvCQ} {
		b, ok := backendOf(q)
		if !ok || b.ctx != ctx {
			return nil, ctx.opErr(op, fmt.Errorf("a CQ from another context: %w", unix.EINVAL))
		}
		cqHandles[i] = b.Handle()
	}
	if err := closedCQErr(cfg); err != nil {
		return nil, ctx.opErr(op, err)
	}
	if err := p.use(op); err != nil {
		return nil, err
	}
	defer ctx.done()
	var srq uint32
	if s := cfg.SRQ; s != nil {
		if s.pd.ctx != ctx {
			return nil, ctx.opErr(op, fmt.Errorf("an SRQ from another context: %w", unix.EINVAL))
		}
		s.mu.RLock() // its handle stays its own to the create's end (see SRQ.mu)
		defer s.mu.RUnlock()
		if s.closed {
			return nil, ctx.opErr(op, fmt.Errorf("srq: %w", ErrClosed))
		}
		srq = s.p.Handle()
		cfg.Cap.MaxRecvWR, cfg.Cap.MaxRecvSGE = 0, 0
	}
	handle := qpHandles.Add(1)
	ctx.trackAsync(ElementQP, handle) // before the create: no event goes uncounted
	pq, err := ctx.drv.CreateQP(kverbs.QPReq{
		PD:         p.handle,
		SendCQ:     cqHandles[0],
		RecvCQ:     cqHandles[1],
		SRQ:        srq,
		HasSRQ:     cfg.SRQ != nil,
		UserHandle: handle,
		Type:       uint8(cfg.Type),
		SigAll:     cfg.SigAll,
		Cap: kverbs.QPCap{
			MaxSendWR: cfg.Cap.MaxSendWR, MaxRecvWR: cfg.Cap.MaxRecvWR,
			MaxSendSGE: cfg.Cap.MaxSendSGE, MaxRecvSGE: cfg.Cap.MaxRecvSGE,
			MaxInlineData: cfg.Cap.MaxInlineData,
		},
	})
	if err != nil {
		ctx.untrackAsync(ElementQP, handle)
		if cerr := closedCQErr(cfg); cerr != nil { // closed during the create
			return nil, ctx.opErr(op, cerr)
		}
		return nil, ctx.opErr(op, fmt.Errorf("%v QP, cap %+v: %w", cfg.Type, cfg.Cap, err))
	}
	q := &QP{pd: p, p: pq, typ: cfg.Type, sendCQ: cfg.SendCQ, recvCQ: cfg.RecvCQ, user: cfg.UserValue, handle: handle}
	ctx.addQP(q)
	if ctx.events.fatal.Load() { // a DEVICE_FATAL read before addQP missed it
		q.halt(ErrDeviceFatal)
	}
	return q, nil
}

// closedCQErr says which of cfg's CQs is closed, if one is: the kernel
// would answer its stale handle with EINVAL or ENOENT, or take another
// CQ's. A CQ is open while its context knows it (NewCQ adds it, its
// destroy removes it).
func closedCQErr(cfg QPConfig) error {
	for i, q := range []*cq.CQ{cfg.SendCQ, cfg.RecvCQ} {
		b, _ := backendOf(q)
		if _, ok := b.ctx.cqs.Load(b.user); !ok {
			which := "send"
			if i == 1 {
				which = "receive"
			}
			return fmt.Errorf("%s CQ: %w", which, ErrClosed)
		}
	}
	return nil
}

// testQPCmdHook, set by tests only, runs in Modify and Query between the
// check that the QP is open and the command.
var testQPCmdHook func()

// qpHandles numbers QPs for the kernel's user handle, never reused, so
// an async event names its QP unambiguously.
var qpHandles atomic.Uint64

// EventHandle returns the handle async events about this QP carry
// (AsyncEvent.QPHandle).
func (q *QP) EventHandle() uint64 { return q.handle }

// UserValue returns QPConfig.UserValue.
func (q *QP) UserValue() uint64 { return q.user }

// QPN returns the QP number, which peers address.
func (q *QP) QPN() uint32 { return q.p.QPN() }

// Type returns the QP's transport type.
func (q *QP) Type() QPType { return q.typ }

// Cap returns the queue sizes the kernel made: at least those asked for.
func (q *QP) Cap() QPCap {
	c := q.p.Cap()
	return QPCap{c.MaxSendWR, c.MaxRecvWR, c.MaxSendSGE, c.MaxRecvSGE, c.MaxInlineData}
}

// PD returns the QP's protection domain.
func (q *QP) PD() *PD { return q.pd }

// Modify changes the attributes of the QP that mask selects
// (ibv_modify_qp): the state machine RESET → INIT → RTR → RTS, with the
// attributes each transition needs (see the QPAttr fields). After Close
// it returns an error wrapping ErrClosed.
func (q *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	const op = "modify qp"
	kerr, err := q.modify(op, attr, mask)
	if kerr != nil {
		return q.pd.ctx.opErr(op, fmt.Errorf("to %v (mask %#x): %w", attr.State, uint32(mask), kerr))
	}
	return err
}

// modify is Modify: err is an *OpError for input refused before the
// kernel saw it (or a closed QP or context), kerr the kernel's bare
// error, for the caller to wrap.
func (q *QP) modify(op string, attr *QPAttr, mask QPAttrMask) (kerr, err error) {
	ctx := q.pd.ctx
	if attr == nil || mask == 0 || mask&^qpAttrAll != 0 {
		return nil, ctx.opErr(op, fmt.Errorf("attribute mask %#x: %w", uint32(mask), unix.EINVAL))
	}
	if err := ctx.use(op); err != nil {
		return nil, err
	}
	// The context is given back before a reset's cleaning, which takes
	// the CQs' locks: a CQ's Close holds its lock while it takes the
	// context, so the context is never held while a CQ's lock is awaited.
	inCtx := true
	defer func() {
		if inCtx {
			ctx.done()
		}
	}()
	q.mu.RLock() // to the command's end, and the reset's: Close waits (see mu)
	defer q.mu.RUnlock()
	if q.closed {
		return nil, ctx.opErr(op, ErrClosed)
	}
	if testQPCmdHook != nil {
		testQPCmdHook()
	}
	m := uapi.IBUverbsModifyQP{
		Dest:            qpDest(&attr.AH),
		QPHandle:        q.p.Handle(),
		AttrMask:        uint32(mask),
		Qkey:            attr.QKey,
		RqPSN:           attr.RQPSN,
		SqPSN:           attr.SQPSN,
		DestQPNum:       attr.DestQPN,
		QPAccessFlags:   uint32(attr.AccessFlags),
		PkeyIndex:       attr.PKeyIndex,
		QPState:         uint8(attr.State),
		CurQPState:      uint8(attr.CurState),
		PathMTU:         uint8(attr.PathMTU),
		MaxRdAtomic:     attr.MaxRdAtomic,
		MaxDestRdAtomic: attr.MaxDestRdAtomic,
		MinRnrTimer:     attr.MinRNRTimer,
		PortNum:         attr.Port,
		Timeout:         attr.Timeout,
		RetryCnt:        attr.RetryCnt,
		RnrRetry:        attr.RNRRetry,
	}
	if err := kverbs.ModifyQP(ctx.conn, &m); err != nil {
		return err, nil
	}
	ctx.done()
	inCtx = false
	if mask&QPAttrState != 0 && attr.State == QPReset {
		q.reset()
	}
	return nil, nil
}

// reset lets the provider follow the QP to RESET: its stale completions
// leave its CQs, and its queues start over.
func (q *QP) reset() {
	r, ok := q.p.(provider.Resetter)
	if !ok {
		return
	}
	// Locks in the order CQ, then the QP's send and receive locks (as
	// CQ.Close takes the context under its CQ's lock, and Context.Close
	// the QPs' locks under the context's), one CQ at a time. A QP its
	// context's Close stopped, or a closed CQ, has no ring to clean (a
	// QP a fatal device stopped keeps its rings until then).
	both := func(f func()) {
		q.sendMu.Lock()
		q.recvMu.Lock()
		if q.stop != ErrClosed {
			f()
		}
		q.recvMu.Unlock()
		q.sendMu.Unlock()
	}
	for i, c := range []*cq.CQ{q.sendCQ, q.recvCQ} {
		if c == nil || (i == 1 && c == q.sendCQ) {
			continue
		}
		if b, ok := backendOf(c); ok {
			cqHooks.Exclusive(c, func() { both(func() { r.CleanCQ(b.CQ) }) })
		}
	}
	both(r.Reset)
}

func qpDest(a *AHAttr) uapi.IBUverbsQPDest {
	d := uapi.IBUverbsQPDest{
		Dgid:         a.GRH.DGID,
		FlowLabel:    a.GRH.FlowLabel,
		Dlid:         a.DLID,
		SgidIndex:    a.GRH.SGIDIndex,
		HopLimit:     a.GRH.HopLimit,
		TrafficClass: a.GRH.TrafficClass,
		Sl:           a.SL,
		SrcPathBits:  a.SrcPathBits,
		StaticRate:   a.StaticRate,
		PortNum:      a.Port,
	}
	if a.IsGlobal {
		d.IsGlobal = 1
	}
	return d
}

// AttachMcast attaches the QP, a UD QP, to the multicast group gid (lid
// its LID on InfiniBand, 0 on RoCE) (ibv_attach_mcast): datagrams sent
// to the group reach its receive queue. rdmacm.JoinMulticast does it
// with the group the join names.
func (q *QP) AttachMcast(gid GID, lid uint16) error {
	return q.mcast("attach mcast", gid, lid, kverbs.AttachMcast)
}

// DetachMcast detaches the QP from the multicast group (ibv_detach_mcast).
func (q *QP) DetachMcast(gid GID, lid uint16) error {
	return q.mcast("detach mcast", gid, lid, kverbs.DetachMcast)
}

func (q *QP) mcast(op string, gid GID, lid uint16, cmd func(*transport.Conn, uint32, [16]byte, uint16) error) error {
	ctx := q.pd.ctx
	if err := ctx.use(op); err != nil {
		return err
	}
	defer ctx.done()
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return ctx.opErr(op, ErrClosed)
	}
	if q.typ != UD {
		return ctx.opErr(op, fmt.Errorf("a %v QP: multicast groups take UD QPs: %w", q.typ, unix.EINVAL))
	}
	if err := cmd(ctx.conn, q.p.Handle(), gid, lid); err != nil {
		return ctx.opErr(op, fmt.Errorf("group %v: %w", gid, err))
	}
	return nil
}

// Query returns the QP's attributes (ibv_query_qp); mask says which the
// caller needs (the kernel may fill more). After Close it returns an
// error wrapping ErrClosed.
func (q *QP) Query(mask QPAttrMask) (QPAttr, error) {
	const op = "query qp"
	ctx := q.pd.ctx
	if err := ctx.use(op); err != nil {
		return QPAttr{}, err
	}
	defer ctx.done()
	q.mu.RLock() // to the command's end: Close waits (see mu)
	defer q.mu.RUnlock()
	if q.closed {
		return QPAttr{}, ctx.opErr(op, ErrClosed)
	}
	if testQPCmdHook != nil {
		testQPCmdHook()
	}
	r, err := kverbs.QueryQP(ctx.conn, q.p.Handle(), uint32(mask))
	if err != nil {
		return QPAttr{}, ctx.opErr(op, err)
	}
	return QPAttr{
		State:           QPState(r.QPState),
		CurState:        QPState(r.CurQPState),
		PathMTU:         MTU(r.PathMTU),
		QKey:            r.Qkey,
		RQPSN:           r.RqPSN,
		SQPSN:           r.SqPSN,
		DestQPN:         r.DestQPNum,
		AccessFlags:     Access(r.QPAccessFlags),
		Cap:             QPCap{r.MaxSendWR, r.MaxRecvWR, r.MaxSendSGE, r.MaxRecvSGE, r.MaxInlineData},
		AH:              ahAttr(&r.Dest),
		PKeyIndex:       r.PkeyIndex,
		SQDraining:      r.SqDraining != 0,
		MaxRdAtomic:     r.MaxRdAtomic,
		MaxDestRdAtomic: r.MaxDestRdAtomic,
		MinRNRTimer:     r.MinRnrTimer,
		Port:            r.PortNum,
		Timeout:         r.Timeout,
		RetryCnt:        r.RetryCnt,
		RNRRetry:        r.RnrRetry,
	}, nil
}

func ahAttr(d *uapi.IBUverbsQPDest) AHAttr {
	return AHAttr{
		GRH: GlobalRoute{DGID: d.Dgid, FlowLabel: d.FlowLabel, SGIDIndex: d.SgidIndex,
			HopLimit: d.HopLimit, TrafficClass: d.TrafficClass},
		DLID: d.Dlid, SL: d.Sl, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate,
		IsGlobal: d.IsGlobal != 0, Port: d.PortNum,
	}
}

// Close destroys the QP (ibv_destroy_qp). It waits for the posts,
// Modify and Query calls in flight; after it, they return ErrClosed
// without sending the kernel a command, as does a second Close.
func (q *QP) Close() error {
	// The context first, then the QP's locks: Context.Close, holding the
	// context, takes each QP's send lock (see PostSend). mu before the
	// post locks: a Modify to RESET holds mu while it takes them.
	ctx := q.pd.ctx
	cerr := ctx.use("destroy qp")
	if cerr == nil {
		defer ctx.done()
	}
	q.mu.Lock() // waits for the Modify and Query in flight (see mu)
	defer q.mu.Unlock()
	q.sendMu.Lock()
	defer q.sendMu.Unlock()
	q.recvMu.Lock()
	defer q.recvMu.Unlock()
	if q.closed {
		return ctx.opErr("destroy qp", ErrClosed)
	}
	if cerr != nil {
		q.p.Release() // the context's close destroyed it in the kernel
		q.closed, q.stop = true, ErrClosed
		return cerr
	}
	if _, err := q.p.Destroy(); err != nil {
		return ctx.opErr("destroy qp", err)
	}
	ctx.untrackAsync(ElementQP, q.handle)
	ctx.removeQP(q)
	q.closed, q.stop = true, ErrClosed
	return nil
}

// contextClosed gives back the provider's memory of a QP its Context's
// Close destroyed in the kernel: rxe's rings are mappings of the uverbs
// fd, each holding the fd's file, so the kernel releases the context, and
// every object on it, only once they are unmapped. Context.Close calls it
// after the fd and the provider's own mappings are gone (mlx5's rings are
// the process's memory, which the device must no longer write). A QP.Close
// after it returns ErrClosed.
func (q *QP) contextClosed() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sendMu.Lock()
	defer q.sendMu.Unlock()
	q.recvMu.Lock()
	defer q.recvMu.Unlock()
	q.stop = ErrClosed
	q.p.Release()
}

// stopped is a post's error once the QP is stopped: it reads stop, then
// releases mu, the post lock the caller holds. Off the posts' path, so
// that they test stop for nil alone.
//
//go:noinline
func (q *QP) stopped(op string, mu *sync.Mutex) error {
	e := q.stop
	mu.Unlock()
	return q.pd.ctx.opErr(op, e)
}

// halt stops the QP's posts with err (ErrDeviceFatal), unless they are
// stopped already. It takes the post locks, so a post in flight ends
// first; the caller holds none of the QP's locks and not the async
// events' mu (QP.Close holds the post locks while it takes that).
func (q *QP) halt(err error) {
	q.sendMu.Lock()
	q.recvMu.Lock()
	if q.stop == nil {
		q.stop = err
	}
	q.recvMu.Unlock()
	q.sendMu.Unlock()
}

// AH is an address handle (ibv_ah): a remote destination for UD sends.
type AH struct {
	p  provider.AH // first: a *AH is the provider's *provider.AHRef
	pd *PD

	mu     sync.Mutex
	closed bool // guarded by mu
}

// NewAH creates an address handle (ibv_create_ah). On RoCE the attribute
// must be global (IsGlobal, with the destination GID and a source GID index).
func (p *PD) NewAH(attr AHAttr) (*AH, error) {
	const op = "create ah"
	ctx := p.ctx
	if attr.Port == 0 {
		return nil, ctx.opErr(op, fmt.Errorf("port 0: %w", unix.EINVAL))
	}
	if err := ctx.use(op); err != nil {
		return nil, err
	}
	defer ctx.done()
	d := qpDest(&attr)
	k := uapi.IBUverbsAHAttr{
		Grh: uapi.IBUverbsGlobalRoute{Dgid: d.Dgid, FlowLabel: d.FlowLabel, SgidIndex: d.SgidIndex,
			HopLimit: d.HopLimit, TrafficClass: d.TrafficClass},
		Dlid: d.Dlid, Sl: d.Sl, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate,
		IsGlobal: d.IsGlobal, PortNum: d.PortNum,
	}
	a, err := ctx.drv.CreateAH(p.handle, 0, &k)
	if err != nil {
		return nil, ctx.opErr(op, err)
	}
	return &AH{pd: p, p: a}, nil
}

// Close destroys the address handle (ibv_destroy_ah).
func (a *AH) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx := a.pd.ctx
	if a.closed {
		return ctx.opErr("destroy ah", ErrClosed)
	}
	if err := ctx.use("destroy ah"); err != nil {
		return err
	}
	defer ctx.done()
	if err := a.p.Destroy(); err != nil {
		return ctx.opErr("destroy ah", err)
	}
	a.closed = true
	return nil
}
