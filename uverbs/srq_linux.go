package uverbs

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
)

// SRQ is a shared receive queue (ibv_srq): the receives posted to it are
// taken, in order, by whichever of its QPs a message arrives on, and the
// completion names that QP (cq.WC.QPNum) and the receive's WRID. QPs take
// from it when made with QPConfig.SRQ. It holds its PD alive. Safe for
// concurrent use. docs/SRQ.md says when to use one and how its limit
// works.
type SRQ struct {
	pd     *PD
	p      provider.SRQ
	user   uint64
	handle uint64 // the kernel user handle: async events name the SRQ by it

	// mu is held for reading by Arm, Query and the creation of a QP on
	// the SRQ, from their check of closed until the kernel answered, and
	// for writing by Close: the kernel reuses handle numbers. Lock order:
	// the context's mu, then mu, then recvMu.
	mu sync.RWMutex
	// closed is written only by Close, holding mu and recvMu.
	closed bool
	// stop is why the SRQ takes no more receives, nil while it may
	// (ErrClosed, ErrDeviceFatal); written holding recvMu, read by each
	// post under it, as QP.stop is.
	stop   error
	recvMu sync.Mutex // serialises PostRecv
}

// srqHandles numbers SRQs for the kernel's user handle, never reused.
var srqHandles atomic.Uint64

// NewSRQ creates a shared receive queue in the PD (ibv_create_srq).
func (p *PD) NewSRQ(cfg SRQConfig) (*SRQ, error) {
	const op = "create srq"
	ctx := p.ctx
	if cfg.MaxWR == 0 || cfg.MaxSGE == 0 {
		return nil, ctx.opErr(op, fmt.Errorf("max wr %d, max sge %d: an SRQ holds at least one receive of one SGE: %w", cfg.MaxWR, cfg.MaxSGE, unix.EINVAL))
	}
	if err := p.use(op); err != nil {
		return nil, err
	}
	defer ctx.done()
	handle := srqHandles.Add(1)
	ctx.trackAsync(ElementSRQ, handle) // before the create: no event goes uncounted
	ps, err := ctx.drv.CreateSRQ(kverbs.SRQReq{PD: p.handle, UserHandle: handle, MaxWR: cfg.MaxWR, MaxSGE: cfg.MaxSGE, Limit: cfg.Limit})
	if err != nil {
		ctx.untrackAsync(ElementSRQ, handle)
		return nil, ctx.opErr(op, fmt.Errorf("max wr %d, max sge %d, limit %d: %w", cfg.MaxWR, cfg.MaxSGE, cfg.Limit, err))
	}
	s := &SRQ{pd: p, p: ps, user: cfg.UserValue, handle: handle}
	ctx.addSRQ(s)
	if ctx.events.fatal.Load() { // a DEVICE_FATAL read before addSRQ missed it
		s.halt(ErrDeviceFatal)
	}
	return s, nil
}

// PostRecv posts receive work requests to the SRQ (ibv_post_srq_recv), in
// order, with no system call. It returns how many were posted; on an
// error, the requests before the bad one are posted and the error names
// its index: more SGEs than the SRQ takes (EINVAL), or the SRQ full
// (ENOMEM). Safe for concurrent use. After Close it returns an error
// wrapping ErrClosed, after a DEVICE_FATAL one wrapping ErrDeviceFatal.
func (s *SRQ) PostRecv(wrs []RecvWR) (int, error) {
	const op = "post srq recv"
	s.recvMu.Lock() // released by hand, as in QP.PostSend
	if s.stop != nil {
		return 0, s.stopped(op)
	}
	n, err := s.p.PostRecv(providerRecvWRs(wrs))
	s.recvMu.Unlock()
	if err != nil {
		return n, s.postErr(err)
	}
	return n, nil
}

// postErr is a post's error, made out of the post's line: inlined, its
// allocation makes the post spill more.
//
//go:noinline
func (s *SRQ) postErr(err error) error { return s.pd.ctx.opErr("post srq recv", err) }

// stopped is a post's error once the SRQ is stopped: it reads stop, then
// releases recvMu. Off the post's path.
//
//go:noinline
func (s *SRQ) stopped(op string) error {
	e := s.stop
	s.recvMu.Unlock()
	return s.pd.ctx.opErr(op, e)
}

// Arm arms the limit event (ibv_modify_srq with IBV_SRQ_LIMIT): the
// Context's next EventSRQLimitReached for this SRQ comes once it holds
// fewer than limit receives. The event fires once; arm again for the
// next. A limit of 0, or one above MaxWR, is an error wrapping EINVAL.
func (s *SRQ) Arm(limit uint32) error {
	const op = "modify srq"
	ctx := s.pd.ctx
	if limit == 0 {
		return ctx.opErr(op, fmt.Errorf("a limit of 0 arms nothing: %w", unix.EINVAL))
	}
	return s.command(op, func() error { return s.p.Modify(kverbs.SRQLimit, kverbs.SRQAttr{Limit: limit}) })
}

// Query returns the SRQ's attributes (ibv_query_srq): its size, SGEs per
// receive, and the limit armed (0 once the event fired).
func (s *SRQ) Query() (SRQAttr, error) {
	var a kverbs.SRQAttr
	err := s.command("query srq", func() (err error) {
		a, err = kverbs.QuerySRQ(s.pd.ctx.conn, s.p.Handle())
		return err
	})
	return SRQAttr{MaxWR: a.MaxWR, MaxSGE: a.MaxSGE, Limit: a.Limit}, err
}

// Resize changes how many receives the SRQ holds (ibv_modify_srq with
// IBV_SRQ_MAX_WR), keeping those posted: at least maxWR, as at creation.
// Posts wait while it runs. Devices without [DeviceCapSRQResize] in
// DeviceAttr.DeviceCapFlags cannot: on them (mlx5) it returns an
// error wrapping ErrNotSupported. Fewer than the receives posted, fewer
// than an armed limit, or more than the device's MaxSRQWR is an error
// wrapping EINVAL, and the SRQ stays as it was.
func (s *SRQ) Resize(maxWR uint32) error {
	const op = "modify srq"
	if maxWR == 0 {
		return s.pd.ctx.opErr(op, fmt.Errorf("max wr 0: an SRQ holds at least one receive: %w", unix.EINVAL))
	}
	return s.command(op, func() error {
		s.recvMu.Lock()
		defer s.recvMu.Unlock()
		if s.stop != nil {
			return s.stop
		}
		if err := s.p.Modify(kverbs.SRQMaxWR, kverbs.SRQAttr{MaxWR: maxWR}); err != nil {
			return fmt.Errorf("resize to %d: %w", maxWR, err)
		}
		return nil
	})
}

// command runs fn, a command that names the SRQ's handle, with the
// context and the SRQ open for its whole length.
func (s *SRQ) command(op string, fn func() error) error {
	ctx := s.pd.ctx
	if err := ctx.use(op); err != nil {
		return err
	}
	defer ctx.done()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ctx.opErr(op, ErrClosed)
	}
	if err := fn(); err != nil {
		return ctx.opErr(op, err)
	}
	return nil
}

// EventHandle returns the handle async events about this SRQ carry
// (AsyncEvent.Element, of kind ElementSRQ).
func (s *SRQ) EventHandle() uint64 { return s.handle }

// UserValue returns SRQConfig.UserValue.
func (s *SRQ) UserValue() uint64 { return s.user }

// MaxWR returns how many receives the SRQ holds: at least SRQConfig.MaxWR,
// or what Resize asked for last.
func (s *SRQ) MaxWR() uint32 {
	s.recvMu.Lock() // Resize changes it under the lock
	defer s.recvMu.Unlock()
	return s.p.MaxWR()
}

// MaxSGE returns how many SGEs a receive may have.
func (s *SRQ) MaxSGE() uint32 { return s.p.MaxSGE() }

// PD returns the SRQ's protection domain.
func (s *SRQ) PD() *PD { return s.pd }

// Close destroys the SRQ (ibv_destroy_srq). While a QP still takes from
// it, the kernel refuses with an error wrapping EBUSY and the SRQ stays.
// A second Close returns ErrClosed.
func (s *SRQ) Close() error {
	const op = "destroy srq"
	ctx := s.pd.ctx
	cerr := ctx.use(op)
	if cerr == nil {
		defer ctx.done()
	}
	s.mu.Lock() // waits for the Arm, Query and QP creation in flight
	defer s.mu.Unlock()
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	if s.closed {
		return ctx.opErr(op, ErrClosed)
	}
	if cerr != nil {
		s.p.Release() // the context's close destroyed it in the kernel
		s.closed, s.stop = true, ErrClosed
		return cerr
	}
	if _, err := s.p.Destroy(); err != nil {
		return ctx.opErr(op, err)
	}
	ctx.untrackAsync(ElementSRQ, s.handle)
	ctx.removeSRQ(s)
	s.closed, s.stop = true, ErrClosed
	return nil
}

// contextClosed gives back the provider's memory of an SRQ its Context's
// Close destroyed in the kernel, as QP.contextClosed does.
func (s *SRQ) contextClosed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	s.stop = ErrClosed
	s.p.Release()
}

// ErrSRQFailed is the error of every post to an SRQ after the device
// reported it failed (the async event SRQ_ERR): the receives it held are
// lost, and its QPs take no more from it. Close the SRQ and its QPs. It
// wraps EIO.
var ErrSRQFailed = fmt.Errorf("srq failed (async event SRQ_ERR): %w", unix.EIO)

// halt stops the SRQ's posts with err (ErrDeviceFatal, ErrSRQFailed),
// unless stopped.
func (s *SRQ) halt(err error) {
	s.recvMu.Lock()
	if s.stop == nil {
		s.stop = err
	}
	s.recvMu.Unlock()
}
