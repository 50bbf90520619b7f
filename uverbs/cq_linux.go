package uverbs

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/cqseam"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
)

// cqHooks are package cq's ways to make and end CQs and channels.
// Package cq, which uverbs imports, registered them in its init.
var cqHooks = cqseam.Of[*cq.CQ, *cq.Channel, cq.Config, cq.WC]()

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
	ch, err := cqHooks.NewChannel(fd, c.dev.Name)
	if err != nil {
		return nil, err
	}
	c.chMu.Lock()
	// Forget those closed since, once the set has doubled since the last
	// time: each creation's share of the sweep stays constant however
	// many channels are open (a server's connections each have one).
	if len(c.chans) >= c.chSweep {
		for o := range c.chans {
			if cqHooks.Closed(o) {
				delete(c.chans, o)
			}
		}
		c.chSweep = 2*len(c.chans) + 8
	}
	c.chans[ch] = struct{}{}
	c.chMu.Unlock()
	return ch, nil
}

// NewCQ creates a completion queue as cfg says (ibv_create_cq): at least
// cfg.Size entries, attached to cfg.Channel if there is one.
func (c *Context) NewCQ(cfg cq.Config) (*cq.CQ, error) {
	q, err := cqHooks.NewCQ(c.dev.Name, cfg, func(r cqseam.Request) (cqseam.Backend[cq.WC], error) {
		const op = "create cq"
		if r.Vector >= c.vectors {
			return nil, c.opErr(op, fmt.Errorf("completion vector %d out of range [0, %d): %w", r.Vector, c.vectors, unix.EINVAL))
		}
		if err := c.use(op); err != nil {
			return nil, err
		}
		defer c.done()
		acks := c.trackAsync(ElementCQ, r.UserHandle) // before the create: no event goes uncounted
		pcq, err := c.drv.CreateCQ(provider.CQReq{CQReq: kverbs.CQReq{
			CQE:        uint32(min(r.Size, 1<<31-1)),
			UserHandle: r.UserHandle,
			Channel:    r.ChannelFD,
			Vector:     uint32(r.Vector),
		}, Timestamps: r.Timestamps})
		if err != nil {
			c.untrackAsync(ElementCQ, r.UserHandle)
			return nil, c.opErr(op, fmt.Errorf("%d entries: %w", r.Size, err))
		}
		b := &cqBackend{CQ: pcq, ctx: c, user: r.UserHandle, acks: acks}
		c.cqs.Store(r.UserHandle, b)
		if c.events.fatal.Load() { // a DEVICE_FATAL read before the Store missed it
			b.fail(ErrDeviceFatal)
		}
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	// Context.Close ends the CQs it finds with a *cq.CQ; one it closed
	// while New was finishing is ended here.
	b := cqHooks.Backend(q).(*cqBackend)
	c.mu.RLock()
	b.q.Store(q)
	closed := c.closed.Load()
	c.mu.RUnlock()
	if closed {
		cqHooks.ShutCQ(q, b.CQ.Release)
		return nil, c.opErr("create cq", ErrClosed)
	}
	return q, nil
}

// cqBackend joins a cq.CQ to its context and provider. Poll and
// EventRead go straight to the provider; calls that use the fd hold the
// context.
type cqBackend struct {
	provider.CQ
	ctx    *Context
	user   uint64         // the kernel user handle: async events name the CQ by it
	acks   *atomic.Uint32 // async events about the CQ acknowledged
	broken atomic.Pointer[brokenErr]
	ring   atomic.Pointer[cqseam.RingLock] // cq.CQ's, when the provider's ring polls directly
	q      atomic.Pointer[cq.CQ]           // the CQ, once NewCQ has it: Context.Close ends it
}

// Ring gives cq.CQ the provider's ring to poll directly: each Poll is one
// call into the provider, and no lock for an empty ring. After an async
// CQ_ERR said the CQ overran, or a DEVICE_FATAL that the device failed,
// fail sets l's error, and the ring hands out what it still holds, then
// fails (RingLock.Fail).
func (b *cqBackend) Ring(l *cqseam.RingLock) cqseam.Ring[cq.WC] {
	b.ring.Store(l)
	if e := b.broken.Load(); e != nil { // an overrun before the store
		l.Fail(e.poll)
	}
	return b.CQ
}

// brokenErr is why a CQ broke: the cause, which ReqNotify returns (cq
// names the verb), and the error Poll returns, built once.
type brokenErr struct{ cause, poll error }

// fail marks the CQ broken by cause (ErrCQOverrun, ErrDeviceFatal); the
// first cause stays. A provider ring that can break
// (rxe's) is broken after the RingLock has the error: its look, which
// then finds no ring, returns the error it finds there (cqseam.RingLock,
// step 1).
func (b *cqBackend) fail(cause error) {
	e := &brokenErr{cause: cause, poll: b.ctx.opErr("poll cq", cause)}
	if !b.broken.CompareAndSwap(nil, e) {
		e = b.broken.Load()
	}
	if l := b.ring.Load(); l != nil {
		l.Fail(e.poll)
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
		return e.cause // cq wraps it as the failed "req notify cq"
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

// ErrCQOverrun is the error of every ReqNotify on a CQ after the device
// reported it overran (the async event CQ_ERR), and of every Poll once
// Poll has handed out the completions the ring still held: completions
// were lost after those, so what comes later is not trusted. It wraps
// EOVERFLOW.
var ErrCQOverrun = fmt.Errorf("cq overrun: completions were lost (async event CQ_ERR): %w", unix.EOVERFLOW)

// noteAsync is told of every async event read; a CQ_ERR breaks its CQ,
// an SRQ_ERR stops its SRQ's posts, a DEVICE_FATAL the whole data path
// (deviceFatal).
func (c *Context) noteAsync(ev AsyncEvent) {
	switch ev.Type {
	case EventCQErr:
	case EventDeviceFatal:
		c.deviceFatal()
		return
	case EventSRQErr:
		if h, ok := ev.SRQHandle(); ok {
			c.srqFailed(h)
		}
		return
	default:
		return
	}
	if h, ok := ev.CQHandle(); ok {
		if b, ok := c.cqs.Load(h); ok {
			b.(*cqBackend).fail(ErrCQOverrun)
		}
	}
}

// backendOf returns the context-side backend of a CQ made by NewCQ.
func backendOf(q *cq.CQ) (*cqBackend, bool) {
	b, ok := cqHooks.Backend(q).(*cqBackend)
	return b, ok
}
