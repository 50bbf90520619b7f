package uverbs

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
)

// NewCompChannel creates a completion channel (ibv_create_comp_channel),
// which one or many CQs can report their events to.
func (c *Context) NewCompChannel() (*cq.Channel, error) {
	const op = "create comp channel"
	if err := c.use(op); err != nil {
		return nil, err
	}
	defer c.done()
	fd, err := kverbs.CreateCompChannel(c.conn)
	if err != nil {
		return nil, c.opErr(op, err)
	}
	return cq.NewChannel(fd, c.dev.Name)
}

// NewCQ creates a completion queue of at least size entries
// (ibv_create_cq), with options cq.WithChannel, cq.WithVector and
// cq.WithUserValue.
func (c *Context) NewCQ(size int, opts ...cq.Option) (*cq.CQ, error) {
	return cq.New(c.dev.Name, size, func(r cq.Request) (cq.Backend, error) {
		const op = "create cq"
		if r.Vector >= c.vectors {
			return nil, c.opErr(op, fmt.Errorf("completion vector %d out of range [0, %d): %w", r.Vector, c.vectors, unix.EINVAL))
		}
		if err := c.use(op); err != nil {
			return nil, err
		}
		defer c.done()
		acks := c.trackAsync(ElementCQ, r.UserHandle) // before the create: no event goes uncounted
		pcq, err := c.drv.CreateCQ(kverbs.CQReq{
			CQE:        uint32(min(r.Size, 1<<31-1)),
			UserHandle: r.UserHandle,
			Channel:    r.ChannelFD,
			Vector:     uint32(r.Vector),
		})
		if err != nil {
			c.untrackAsync(ElementCQ, r.UserHandle)
			return nil, c.opErr(op, fmt.Errorf("%d entries: %w", r.Size, err))
		}
		b := &cqBackend{CQ: pcq, ctx: c, user: r.UserHandle, acks: acks}
		c.cqs.Store(r.UserHandle, b)
		return b, nil
	}, opts...)
}

// cqBackend joins a cq.CQ to its context and provider. Poll and
// EventRead go straight to the provider; calls that use the fd hold the
// context.
type cqBackend struct {
	provider.CQ
	ctx    *Context
	user   uint64         // the kernel user handle: async events name the CQ by it
	acks   *atomic.Uint32 // async events about the CQ acknowledged
	broken atomic.Pointer[error]
	ring   atomic.Pointer[cq.RingLock] // cq.CQ's, when the provider's ring polls directly
}

// Poll polls the provider's ring, or fails once an async CQ_ERR said the
// CQ overran: its ring then misses completions, so none is trusted.
func (b *cqBackend) Poll(wcs []cq.WC) (int, error) {
	if e := b.broken.Load(); e != nil {
		return 0, *e
	}
	return b.CQ.Poll(wcs), nil
}

// Ring gives cq.CQ the provider's ring to poll directly, where the
// provider has one that can be read without a lock (rxe, mlx5): Poll then makes
// one call into the provider, not two. fail sets l's error from then on.
func (b *cqBackend) Ring(l *cq.RingLock) cq.Ring {
	r, ok := b.CQ.(cq.Ring)
	if !ok {
		return nil
	}
	b.ring.Store(l)
	if e := b.broken.Load(); e != nil { // an overrun before the store
		l.Fail(*e)
	}
	return r
}

// fail marks the CQ broken. A provider ring that can break (rxe's) is
// broken after the RingLock has the error: its look, which then finds no
// ring, returns the error it finds there (cq.RingLock, step 1).
func (b *cqBackend) fail(err error) {
	b.broken.CompareAndSwap(nil, &err)
	if l := b.ring.Load(); l != nil {
		l.Fail(err)
	}
	if r, ok := b.CQ.(ringBreaker); ok {
		r.Break()
	}
}

// ringBreaker is a provider CQ whose PollRing reads the RingLock's error
// only when its look finds no ring: Break takes the ring from the look.
type ringBreaker interface{ Break() }

func (b *cqBackend) Resize(n int) (int, error) {
	if err := b.ctx.use("resize cq"); err != nil {
		return 0, ErrClosed
	}
	defer b.ctx.done()
	return b.CQ.Resize(n)
}

func (b *cqBackend) ReqNotify(solicitedOnly bool) error {
	if e := b.broken.Load(); e != nil {
		return *e
	}
	// Context.use and done, written out as in QP.PostSend: the arm's hot
	// path (rxe's arm is a write command on the context's fd).
	c := b.ctx
	c.mu.RLock()
	if c.closed.Load() {
		c.mu.RUnlock()
		return ErrClosed
	}
	err := b.CQ.ReqNotify(solicitedOnly)
	c.mu.RUnlock()
	return err
}

func (b *cqBackend) Destroy() (uint32, uint32, error) {
	const op = "destroy cq"
	if err := b.ctx.use(op); err != nil {
		b.CQ.Release() // the context's close destroyed it in the kernel
		b.ctx.cqs.Delete(b.user)
		return 0, 0, err
	}
	defer b.ctx.done()
	ev, err := b.CQ.Destroy()
	if err != nil {
		return 0, 0, b.ctx.opErr(op, err)
	}
	b.ctx.untrackAsync(ElementCQ, b.user)
	b.ctx.cqs.Delete(b.user)
	return ev.Comp, ev.Async, nil
}

// ErrCQOverrun is the error of every Poll and ReqNotify on a CQ after the
// device reported it overran (the async event CQ_ERR): completions were
// lost, so its contents are not trusted. It wraps EOVERFLOW.
var ErrCQOverrun = fmt.Errorf("cq overrun: completions were lost (async event CQ_ERR): %w", unix.EOVERFLOW)

// noteAsync is told of every async event read; a CQ_ERR breaks its CQ.
func (c *Context) noteAsync(ev AsyncEvent) {
	if ev.Type != EventCQErr {
		return
	}
	if h, ok := ev.CQHandle(); ok {
		if b, ok := c.cqs.Load(h); ok {
			b.(*cqBackend).fail(&OpError{Op: "poll cq", Device: c.dev.Name, Err: ErrCQOverrun})
		}
	}
}

// backendOf returns the context-side backend of a CQ made by NewCQ.
func backendOf(q *cq.CQ) (*cqBackend, bool) {
	b, ok := q.Backend().(*cqBackend)
	return b, ok
}
