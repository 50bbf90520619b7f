package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/ucma"
	"github.com/goverbs/goverbs/uverbs"
)

// Conn is an established RC connection: its QP (in RTS), the CQ its send
// and receive queues share, that CQ's completion channel, and the PD,
// with the two addresses and the private data the peer sent. Post work
// with QP().PostSend and PostRecv, poll CQ() or wait on CompChannel(),
// register memory with PD().RegMR.
//
// Its connection-manager events come on an rdma_cm channel that all the
// package's connections share, read by one goroutine: when the peer
// disconnects (or the device goes away) it moves the QP to the error
// state, so that posted work flushes once, answers the peer's
// disconnect, and closes Disconnected().
//
// Its methods are safe for concurrent use.
type Conn struct {
	cfg  Config
	hub  *hub
	id   *ID
	name string
	pd   *uverbs.PD
	cc   *cq.Channel
	cq   *cq.CQ
	qp   *uverbs.QP
	// ownCQ: cq and cc are the Conn's, not Config.CQ's. ownPD: pd is
	// the Conn's (Config.OwnPD). setupCalled: Config.Setup was called, so
	// Config.Release is due.
	ownCQ, ownPD, setupCalled bool
	// addr is the ID's addresses and device, where the listener asked
	// the kernel already (setup asks otherwise).
	addr *ucma.AddrInfo

	local, remote netip.AddrPort
	private       []byte

	in       inbox         // the ID's events, from the hub
	disc     chan struct{} // closed when the connection is down
	discOnce sync.Once
	selfDisc atomic.Bool // Close disconnected: down need not answer

	closeMu sync.Mutex
	closed  bool
}

// newConn is a Conn on hub h, its ID yet to come.
func newConn(h *hub, c Config, name string) *Conn {
	conn := &Conn{cfg: c, hub: h, name: name, disc: make(chan struct{}), in: inbox{wake: make(chan struct{}, 1)}}
	conn.in.q = conn.in.buf[:0]
	return conn
}

// Dial connects to address ("192.0.2.1:7471", or a name the resolver
// knows, and a port) over RC in the TCP port space, as rdma_cm's
// rdma_resolve_addr, rdma_resolve_route, rdma_create_qp and rdma_connect
// do. ctx bounds the whole: address and route resolution and the
// connection; an already-ended ctx returns at once. cfg may be nil.
//
// A refused connection is an error wrapping a *RejectError (with the
// peer's private data), which errors.Is treats as
// syscall.ECONNREFUSED; nobody listening on the port is one (reason 8).
// A ctx deadline gives an error wrapping context.DeadlineExceeded and
// os.ErrDeadlineExceeded.
func Dial(ctx context.Context, address string, cfg *Config) (*Conn, error) {
	growStack()
	conn, err := dialRoute(ctx, address, cfg, PortSpaceTCP)
	if err != nil {
		return nil, err
	}
	c, id := conn.cfg, conn.id
	ok := false
	defer func() {
		if !ok {
			conn.teardown()
		}
	}()
	if err := conn.setup(); err != nil {
		return nil, err
	}
	if err := conn.runSetup(); err != nil {
		return nil, err
	}
	p := ConnParam{
		PrivateData:        c.PrivateData,
		ResponderResources: pick(c.ResponderResources, MaxResources),
		InitiatorDepth:     pick(c.InitiatorDepth, MaxResources),
		RetryCount:         c.RetryCount,
		RNRRetryCount:      c.RNRRetryCount,
	}
	if err := id.Connect(&p); err != nil {
		return nil, err
	}
	peer, err := conn.await(ctx, "connect", EventEstablished)
	if err != nil {
		return nil, err
	}
	conn.private = peer
	conn.start()
	ok = true
	return conn, nil
}

// dialRoute is the active side's start in port space ps, Dial's and
// DialUD's: it checks ctx and cfg.PrivateData, resolves address, and
// makes a Conn with an ID on the hub whose address and route are
// resolved (rdma_resolve_addr, rdma_resolve_route). On an error it has
// destroyed what it made.
func dialRoute(ctx context.Context, address string, cfg *Config, ps PortSpace) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, &OpError{Op: "dial", Device: address, Err: ctxErr(err)}
	}
	c := cfg.withDefaults()
	if err := checkPrivateData(ps, "connect", c.PrivateData); err != nil {
		return nil, &OpError{Op: "connect", Device: address, Err: err}
	}
	dst, err := resolveHost(ctx, address, false)
	if err != nil {
		return nil, &OpError{Op: "dial", Device: address, Err: err}
	}
	h, err := acquireHub()
	if err != nil {
		return nil, err
	}
	conn := newConn(h, c, dst.String())
	if err := conn.resolve(ctx, ps, dst); err != nil {
		conn.teardown()
		return nil, err
	}
	return conn, nil
}

// resolve makes the Conn's ID in ps and resolves its address and route
// to dst.
func (c *Conn) resolve(ctx context.Context, ps PortSpace, dst netip.AddrPort) error {
	id, err := c.hub.ch.NewID(ps)
	if err != nil {
		return err
	}
	c.id = id
	id.sink.Store(c)
	id.setName(c.name)
	if c.cfg.TOS != 0 {
		if err := id.SetTOS(c.cfg.TOS); err != nil {
			return err
		}
	}
	if err := id.ResolveAddr(netip.AddrPort{}, dst, kernelTimeout(ctx)); err != nil {
		return err
	}
	if _, err := c.await(ctx, "resolve addr", EventAddrResolved); err != nil {
		return err
	}
	if err := id.ResolveRoute(kernelTimeout(ctx)); err != nil {
		return err
	}
	_, err = c.await(ctx, "resolve route", EventRouteResolved)
	return err
}

// pick is v, or def where v is 0.
func pick(v, def uint8) uint8 {
	if v == 0 {
		return def
	}
	return v
}

// await takes the Conn's events until the event want, and returns its
// private data; a failure event, or ctx's end, is op's error. Other
// events are passed over.
func (c *Conn) await(ctx context.Context, op string, want EventType) ([]byte, error) {
	e, err := c.awaitEvent(ctx, op, want)
	return e.private, err
}

// awaitEvent is await, returning the whole event.
func (c *Conn) awaitEvent(ctx context.Context, op string, want EventType) (connEvent, error) {
	for {
		e, err := c.next(ctx)
		if err != nil {
			return e, c.opErr(op, err)
		}
		t := e.typ
		if t == want {
			return e, nil
		}
		switch t {
		case EventAddrError, EventRouteError, EventConnectError, EventUnreachable, EventRejected,
			EventDeviceRemoval, EventDisconnected:
			err := e.err()
			if t == EventConnectError {
				if cerr := c.id.connectErr(); cerr != nil {
					err = cerr
				}
			}
			if err == nil {
				err = fmt.Errorf("%v: %w", t, errInvalid)
			}
			return e, c.opErr(op, err)
		}
		// ADDR_CHANGE, TIMEWAIT_EXIT: nothing to do here
	}
}

// opErr is op's error on the Conn: err, or the cause of an *OpError
// err is, which names another op.
func (c *Conn) opErr(op string, err error) error {
	var oe *OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &OpError{Op: op, Device: c.name, Err: err}
}

// setup makes the connection's CQ, channel and QP on the ID's device
// (or takes Config's PD, CQ and SRQ) and attaches the QP to the ID (INIT).
func (c *Conn) setup() error {
	const op = "create qp"
	pd, srq := c.cfg.PD, c.cfg.SRQ
	if srq != nil {
		switch {
		case c.id.ps.ud():
			return &OpError{Op: op, Device: c.name, Err: fmt.Errorf("Config.SRQ on a UD connection (RC only): %w", errInvalid)}
		case c.cfg.OwnPD:
			return &OpError{Op: op, Device: c.name, Err: fmt.Errorf("Config.OwnPD with Config.SRQ, which is on a PD of its own: %w", errInvalid)}
		case pd != nil && pd != srq.PD():
			return &OpError{Op: op, Device: c.name, Err: fmt.Errorf("Config.SRQ on another PD than Config.PD: %w", errInvalid)}
		}
		pd = srq.PD()
	}
	if c.cfg.CQ != nil && pd == nil {
		return &OpError{Op: op, Device: c.name, Err: fmt.Errorf("Config.CQ without Config.PD, the PD on the CQ's device context: %w", errInvalid)}
	}
	if c.cfg.OwnPD && pd != nil {
		return &OpError{Op: op, Device: c.name, Err: fmt.Errorf("Config.OwnPD with Config.PD: %w", errInvalid)}
	}
	var (
		a   ucma.AddrInfo
		err error
	)
	if c.addr != nil {
		a = *c.addr
	} else if a, err = c.id.query(); err != nil {
		return err
	}
	c.local, c.remote = a.Src.IP, a.Dst.IP
	if pd != nil {
		c.pd = pd
		if g := uint64(c.pd.Context().Device().NodeGUID); g != a.NodeGUID {
			return &OpError{Op: op, Device: c.name, Err: fmt.Errorf("Config.PD (or SRQ) is on %s (node GUID %#x), the address on node GUID %#x: %w",
				c.pd.Context().Device().Name, g, a.NodeGUID, errInvalid)}
		}
	} else if c.pd, err = c.id.pdOf(a); err != nil {
		return err
	} else if c.cfg.OwnPD {
		if c.pd, err = c.pd.Context().AllocPD(); err != nil {
			return c.opErr(op, err)
		}
		c.ownPD = true
	}
	if c.cfg.CQ != nil {
		c.cq, c.cc = c.cfg.CQ, c.cfg.CQ.Channel()
	} else {
		c.ownCQ = true
		ctx := c.pd.Context()
		if c.cc, err = ctx.NewCompChannel(); err != nil {
			return err
		}
		if c.cq, err = ctx.NewCQ(cq.Config{Size: c.cfg.CQSize, Channel: c.cc}); err != nil {
			return err
		}
	}
	qpt := uverbs.RC
	if c.id.ps.ud() {
		qpt = uverbs.UD
	}
	c.qp, err = c.pd.NewQP(uverbs.QPConfig{Type: qpt, SendCQ: c.cq, RecvCQ: c.cq, Cap: c.cfg.Cap, SigAll: c.cfg.SigAll, SRQ: srq})
	if err != nil {
		return err
	}
	if c.cfg.AckTimeout > 0 && qpt == uverbs.RC {
		if err := c.id.SetAckTimeout(c.cfg.AckTimeout); err != nil {
			return err
		}
	}
	return c.id.AttachQP(c.qp)
}

// runSetup calls Config.Setup, if set.
func (c *Conn) runSetup() error {
	c.setupCalled = true
	if c.cfg.Setup == nil {
		return nil
	}
	if err := c.cfg.Setup(c); err != nil {
		return &OpError{Op: "setup", Device: c.name, Err: err}
	}
	return nil
}

// down takes the connection down once: the QP to the error state (its
// posted work flushes), our DISCONNECT (which answers the peer's) unless
// Close sent one, and Disconnected closed.
func (c *Conn) down() {
	c.discOnce.Do(func() {
		if !c.selfDisc.Load() {
			_ = c.id.Disconnect() // moves the QP to ERR first
		}
		close(c.disc)
	})
}

// Disconnected returns a channel that is closed when the connection goes
// down: the peer disconnected, the device went away, or Close.
func (c *Conn) Disconnected() <-chan struct{} { return c.disc }

// QP returns the connection's queue pair (RC, in RTS).
func (c *Conn) QP() *uverbs.QP { return c.qp }

// CQ returns the completion queue the QP's send and receive queues share:
// the Conn's own, or Config.CQ.
func (c *Conn) CQ() *cq.CQ { return c.cq }

// CompChannel returns the CQ's completion channel, to wait for its
// events (CQ.ReqNotify, then Channel.Wait); with Config.CQ, that CQ's
// (nil if it has none).
func (c *Conn) CompChannel() *cq.Channel { return c.cc }

// PD returns the protection domain of the QP, for memory registration:
// unless Config.PD gave one, the package's PD shared by every connection
// on the device. Close the MRs registered on it before the Conn: the last
// connection on the device closes the PD and its device context.
func (c *Conn) PD() *uverbs.PD { return c.pd }

// LocalAddr returns the local address and port.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// RemoteAddr returns the peer's address and port.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// PrivateData returns the private data the peer sent: its acceptance's
// (Dial) or its request's (Accept), the CM message's whole field, the
// peer's bytes then zeros.
func (c *Conn) PrivateData() []byte { return c.private }

// Close disconnects (the QP moves to the error state, so posted work
// flushes; the peer gets DISCONNECTED), waits up to Config.CloseWait for
// the peer's answer, and destroys the QP, the CQ and its channel, and the
// connection's ID (rdma_disconnect, rdma_destroy_qp, rdma_destroy_id).
// Its CQ's events must be acknowledged (cq.CQ.Ack) first, or the CQ and
// channel stay until the device closes, and Close says so. A second
// Close returns ErrClosed.
func (c *Conn) Close() error {
	if err := c.markClosed(); err != nil {
		return err
	}
	select {
	case <-c.disc:
	default:
		c.selfDisc.Store(true)
		_ = c.id.Disconnect()
		t := time.NewTimer(c.cfg.CloseWait)
		select {
		case <-c.disc:
		case <-t.C:
		}
		t.Stop()
	}
	c.discOnce.Do(func() { close(c.disc) })
	return c.teardown()
}

// isClosed reports whether Close was called.
func (c *Conn) isClosed() bool {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	return c.closed
}

// markClosed marks the Conn (or the UDConn on it) closed, once: a second
// call is an error wrapping ErrClosed.
func (c *Conn) markClosed() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed {
		return &OpError{Op: "close", Device: c.name, Err: ErrClosed}
	}
	c.closed = true
	return nil
}

// teardown destroys what the Conn made, in order, and returns the first
// error.
func (c *Conn) teardown() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if c.qp != nil {
		keep(c.qp.Close())
	}
	if c.setupCalled && c.cfg.Release != nil {
		c.cfg.Release(c)
	}
	if c.ownPD {
		keep(c.pd.Close())
	}
	if c.cq != nil && c.ownCQ {
		keep(c.cq.Close())
	}
	if c.cc != nil && c.ownCQ {
		// The user may have closed the channel to wake a Wait on it.
		if err := c.cc.Close(); err != nil && !errors.Is(err, cq.ErrClosed) {
			keep(err)
		}
	}
	if c.id != nil {
		if err := c.id.Close(); err != nil && !errors.Is(err, ErrClosed) {
			keep(err)
		}
	}
	if c.hub != nil {
		c.hub.release()
	}
	return first
}

// Listener listens for RC connections on an address and port, in the TCP
// port space (rdma_listen). A goroutine of its own reads its connection
// requests, up to Config.Backlog of them ahead of Accept; beyond that
// the kernel holds them, and beyond its own backlog the peers retry.
// Its methods are safe for concurrent use.
type Listener struct {
	cfg  Config
	ch   *EventChannel
	id   *ID
	addr netip.AddrPort

	reqs      chan *Request
	done      chan struct{} // closed by Close
	failed    chan struct{} // closed when the listener broke (err says why)
	err       error
	stop      context.CancelFunc
	serveDone chan struct{}
	closeMu   sync.Mutex
	closed    bool
}

// Listen listens on address ("192.0.2.1:7471"; an empty host is the IPv4
// wildcard, a port 0 a free one). cfg, which may be nil, gives Backlog
// and what Accept gives each connection.
func Listen(ctx context.Context, address string, cfg *Config) (*Listener, error) {
	return listenPS(ctx, address, cfg, PortSpaceTCP)
}

// listenPS is Listen in port space ps.
func listenPS(ctx context.Context, address string, cfg *Config, ps PortSpace) (*Listener, error) {
	if err := ctx.Err(); err != nil {
		return nil, &OpError{Op: "listen", Device: address, Err: ctxErr(err)}
	}
	c := cfg.withDefaults()
	if err := checkPrivateData(ps, "accept", c.PrivateData); err != nil {
		return nil, &OpError{Op: "listen", Device: address, Err: err}
	}
	addr, err := resolveHost(ctx, address, true)
	if err != nil {
		return nil, &OpError{Op: "listen", Device: address, Err: err}
	}
	ch, err := NewEventChannel()
	if err != nil {
		return nil, err
	}
	id, err := ch.NewID(ps)
	if err == nil {
		if err = id.Bind(addr); err == nil {
			err = id.Listen(c.Backlog)
		}
	}
	if err != nil {
		ch.Close()
		return nil, err
	}
	if local, _, err := id.Addrs(); err == nil && local.IsValid() {
		addr = local
		id.setName(addr.String())
	}
	sctx, stop := context.WithCancel(context.Background())
	l := &Listener{cfg: c, ch: ch, id: id, addr: addr, reqs: make(chan *Request, c.Backlog),
		done: make(chan struct{}), failed: make(chan struct{}), stop: stop, serveDone: make(chan struct{})}
	go l.serve(sctx)
	return l, nil
}

// Addr returns the address and port the listener is bound to.
func (l *Listener) Addr() netip.AddrPort { return l.addr }

// serve reads the listener's events: each CONNECT_REQUEST becomes a
// Request queued for Accept.
func (l *Listener) serve(ctx context.Context) {
	defer close(l.serveDone)
	for {
		ev, err := l.ch.Wait(ctx)
		if err != nil {
			if ctx.Err() == nil {
				l.fail(err)
			}
			return
		}
		switch ev.Type {
		case EventConnectRequest:
			r := &Request{l: l, id: ev.ID}
			r.param = ev.Param
			r.param.PrivateData = append([]byte(nil), ev.Param.PrivateData...)
			ev.Ack()
			if a, err := r.id.query(); err == nil {
				// The kernel names no scope in a request's link-local
				// addresses: they are on the listener's link.
				a.Src.IP, a.Dst.IP = onLinkOf(a.Src.IP, l.addr), onLinkOf(a.Dst.IP, l.addr)
				r.addr = &a
				r.local, r.remote = a.Src.IP, a.Dst.IP
			}
			r.id.setName(r.remote.String())
			select {
			case l.reqs <- r:
			case <-ctx.Done():
				r.id.abandon()
				return
			}
		case EventDeviceRemoval:
			ev.Ack()
			l.fail(&OpError{Op: "listen", Device: l.addr.String(), Err: statusErr(EventDeviceRemoval, 0, nil)})
			return
		default:
			ev.Ack()
		}
	}
}

func (l *Listener) fail(err error) {
	l.err = err
	close(l.failed)
}

// Accept waits for the next connection request and accepts it with the
// listener's Config, returning the established connection. It ends with
// ErrClosed when the listener is closed (also one Accept is waiting in),
// and with ctx's error when ctx ends first.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	r, err := l.AcceptRequest(ctx)
	if err != nil {
		return nil, err
	}
	return r.Accept(ctx, nil)
}

// AcceptRequest waits for the next connection request and returns it
// unanswered, for the caller to look at (Request.PrivateData) and
// Accept or Reject. A request nobody answers is rejected when the
// listener closes.
func (l *Listener) AcceptRequest(ctx context.Context) (*Request, error) {
	select {
	case <-l.done:
		return nil, &OpError{Op: "accept", Device: l.addr.String(), Err: ErrClosed}
	default:
	}
	select {
	case r := <-l.reqs:
		return r, nil
	case <-l.done:
		return nil, &OpError{Op: "accept", Device: l.addr.String(), Err: ErrClosed}
	case <-l.failed:
		return nil, l.err
	case <-ctx.Done():
		return nil, &OpError{Op: "accept", Device: l.addr.String(), Err: ctxErr(ctx.Err())}
	}
}

// Close stops listening: a waiting Accept returns ErrClosed, the
// requests not yet accepted are rejected, and the listening ID is
// destroyed. Connections already accepted stay. A second Close returns
// ErrClosed.
func (l *Listener) Close() error {
	l.closeMu.Lock()
	if l.closed {
		l.closeMu.Unlock()
		return &OpError{Op: "close", Device: l.addr.String(), Err: ErrClosed}
	}
	l.closed = true
	l.closeMu.Unlock()
	close(l.done)
	l.stop()
	<-l.serveDone
	for {
		select {
		case r := <-l.reqs:
			r.abandon()
			continue
		default:
		}
		break
	}
	err := l.id.Close() // rejects and destroys the requests handed out and not answered
	if cerr := l.ch.Close(); err == nil && !errors.Is(cerr, ErrClosed) {
		err = cerr
	}
	return err
}

// Request is a connection request a Listener received and nobody
// answered yet: Accept or Reject it. Its methods are safe for concurrent
// use; the first answer wins.
type Request struct {
	l             *Listener
	id            *ID
	param         ConnParam
	addr          *ucma.AddrInfo // the kernel's view of the id, if it gave one
	local, remote netip.AddrPort
	mu            sync.Mutex
	answered      bool
}

// PrivateData returns the private data of the request: the peer's bytes,
// then zeros up to MaxConnectPrivateDataTCP.
func (r *Request) PrivateData() []byte { return r.param.PrivateData }

// RemoteAddr returns the requesting peer's address and port.
func (r *Request) RemoteAddr() netip.AddrPort { return r.remote }

// LocalAddr returns the address and port the request came to.
func (r *Request) LocalAddr() netip.AddrPort { return r.local }

// answer claims the request for one answer.
func (r *Request) answer(op string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answered {
		return &OpError{Op: op, Device: r.remote.String(), Err: fmt.Errorf("request already answered: %w", ErrClosed)}
	}
	r.answered = true
	return nil
}

// abandon rejects and destroys a request nobody answered.
func (r *Request) abandon() {
	if r.answer("reject") == nil {
		r.id.abandon()
	}
}

// Accept accepts the request with cfg (nil: the listener's Config) and
// returns the connection once the peer has confirmed it (ESTABLISHED),
// or ctx ended. It moves the request's ID from the listener's channel to
// the one the package's connections share, so the Conn outlives the
// Listener.
func (r *Request) Accept(ctx context.Context, cfg *Config) (*Conn, error) {
	const op = "accept"
	growStack()
	if r.id.ps.ud() {
		return nil, &OpError{Op: op, Device: r.remote.String(), Err: fmt.Errorf("a UD request: use AcceptUD: %w", errInvalid)}
	}
	conn, err := r.migrate(ctx, op, cfg)
	if err != nil {
		return nil, err
	}
	c := conn.cfg
	ok := false
	defer func() {
		if !ok {
			conn.teardown()
		}
	}()
	err = conn.setup()
	if err == nil {
		err = conn.runSetup()
	}
	if err != nil {
		_ = r.id.Reject(nil)
		return nil, err
	}
	// The peer's offer, seen from here (the kernel swaps them), capped
	// by the device (ID.Accept's MaxResources), unless the Config says
	// otherwise.
	p := ConnParam{
		PrivateData:        c.PrivateData,
		ResponderResources: pick(c.ResponderResources, MaxResources),
		InitiatorDepth:     pick(c.InitiatorDepth, MaxResources),
		RNRRetryCount:      c.RNRRetryCount,
	}
	if err := r.id.Accept(&p); err != nil {
		return nil, err
	}
	if _, err := conn.await(ctx, op, EventEstablished); err != nil {
		return nil, err
	}
	conn.start()
	ok = true
	return conn, nil
}

// migrate begins the passive side of Accept and AcceptUD: it claims the
// request, takes cfg (nil: the listener's Config) and checks its private
// data, then moves the request's ID to the hub (rdma_migrate_id). A UD
// request is checked against ctx here, since AcceptUD waits for nothing
// afterwards (Accept's wait for ESTABLISHED checks it). On an error after
// the claim the request is rejected and destroyed.
func (r *Request) migrate(ctx context.Context, op string, cfg *Config) (*Conn, error) {
	if err := r.answer(op); err != nil {
		return nil, err
	}
	c := r.l.cfg
	if cfg != nil {
		c = cfg.withDefaults()
	}
	if r.id.ps.ud() {
		if err := ctx.Err(); err != nil {
			r.id.abandon()
			return nil, &OpError{Op: op, Device: r.remote.String(), Err: ctxErr(err)}
		}
	}
	if err := checkPrivateData(r.id.ps, "accept", c.PrivateData); err != nil {
		r.id.abandon()
		return nil, &OpError{Op: op, Device: r.remote.String(), Err: err}
	}
	h, err := acquireHub()
	if err != nil {
		r.id.abandon()
		return nil, err
	}
	conn := newConn(h, c, r.remote.String())
	conn.id, conn.private, conn.addr = r.id, r.param.PrivateData, r.addr
	r.id.sink.Store(conn)
	if err := r.id.Migrate(h.ch); err != nil {
		r.id.abandon()
		conn.teardown()
		return nil, err
	}
	return conn, nil
}

// Reject refuses the request with private data for the peer (at most
// MaxRejectPrivateData bytes; the peer's Dial returns a *RejectError
// carrying it) and destroys its ID. Too much private data is an error
// wrapping EINVAL, and the request stays unanswered.
func (r *Request) Reject(privateData []byte) error {
	if err := checkPrivateData(r.id.ps, "reject", privateData); err != nil {
		return &OpError{Op: "reject", Device: r.remote.String(), Err: err}
	}
	if err := r.answer("reject"); err != nil {
		return err
	}
	err := r.id.Reject(privateData)
	r.id.mu.Lock()
	if r.id.closed {
		r.id.mu.Unlock()
		return err
	}
	if derr := r.id.destroyLocked(); err == nil {
		err = derr
	}
	return err
}

// growStack grows the calling goroutine's stack, while the goroutine is
// still shallow, to the 8 KiB that setting a connection up reaches (the
// rdma_cm and uverbs commands are built and parsed on the stack). A
// goroutine started for the connection has 2 KiB and would otherwise
// grow twice, deep in those calls, where the runtime's copy walks every
// frame: counted under -icount, that was about 60 thousand instructions
// a connection of cmtime's (both sides), 7 % of the whole. Here it
// grows once, over a few frames. On a goroutine that is already large
// enough it costs zeroing the frame.
//
//go:noinline
func growStack() {
	var frame [5 << 10]byte // with the guard and the callers: past 4 KiB
	keepFrame(frame[:])
}

// keepFrame keeps growStack's frame from being optimized away.
//
//go:noinline
func keepFrame([]byte) {}
