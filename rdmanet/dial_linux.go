package rdmanet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// streamSends is how many of the send queue's requests the stream may
// have in flight: a message per write buffer, and two for credit and fin
// messages.
func streamSends(cfg Config) int { return cfg.WriteBuffers + 2 }

// cmConfig is the rdmacm configuration of a connection with cfg: its
// QP's queues, its hello, and setup, which makes the Conn and is handed
// the hello's bytes to complete (the ring's address and rkey: rdmacm
// sends the private data after Setup).
//
// The send queue holds the stream's sends and, beside them, opSlots
// one-sided operations: each side has its own share, so ReadAts and
// WriteAts in flight never take a slot a Write waits for, nor the
// reverse. The CQ has room for every request of both queues, so it
// cannot overrun. ResponderResources and InitiatorDepth stay 0, the
// device's maximum (rdmacm's default): a peer's RDMA READs need this
// side's responder resources, and with them the kernel's CM gives the QP
// remote read, write and atomic access (what a Region's MR grants is
// then the only limit).
//
// Each connection has a PD of its own (OwnPD): its ring's and its
// Regions' rkeys work for its peer alone. release deregisters what is
// registered on it, after the QP and before the PD.
func cmConfig(cfg Config, setup func(rc *rdmacm.Conn, pd []byte) error, release func()) *rdmacm.Config {
	r, s := cfg.ReadBuffers, streamSends(cfg)+opSlots
	pd := make([]byte, helloSize)
	return &rdmacm.Config{
		Cap:         uverbs.QPCap{MaxSendWR: uint32(s), MaxRecvWR: uint32(r), MaxSendSGE: 1, MaxRecvSGE: 1},
		CQSize:      s + r,
		PrivateData: pd,
		OwnPD:       true,
		Setup:       func(rc *rdmacm.Conn) error { return setup(rc, pd) },
		Release:     func(*rdmacm.Conn) { release() },
	}
}

// checkNetwork accepts rdmanet's network name, and for a dial the TCP
// ones: code written for TCP (http.Transport, gRPC's dialer) asks for
// "tcp", and a Dialer plugged into it means RDMA.
func checkNetwork(op, nw, address string) error {
	switch nw {
	case network:
		return nil
	case "tcp", "tcp4", "tcp6":
		if op == "dial" {
			return nil
		}
	}
	return &net.OpError{Op: op, Net: nw, Err: net.UnknownNetworkError(nw)}
}

// Dialer dials rdmanet connections; its zero value is the defaults.
type Dialer struct {
	// Timeout and Deadline bound the connection's making, as net.Dialer's
	// do: address and route resolution, and the connection itself.
	Timeout  time.Duration
	Deadline time.Time
	// Config sizes the connection's buffers.
	Config Config
}

// Dial connects to address ("192.0.2.1:7471") on the network "rdma"
// ("tcp", "tcp4" and "tcp6" are taken to mean it too).
func Dial(nw, address string) (net.Conn, error) {
	var d Dialer
	return d.DialContext(context.Background(), nw, address)
}

// DialContext connects to address on the network "rdma", within ctx.
// It takes "tcp", "tcp4" and "tcp6" to mean "rdma", so that it fits
// http.Transport.DialContext and other code written to dial TCP.
func (d *Dialer) DialContext(ctx context.Context, nw, address string) (net.Conn, error) {
	if err := checkNetwork("dial", nw, address); err != nil {
		return nil, err
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	if !d.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Deadline)
		defer cancel()
	}
	cfg := d.Config.withDefaults()
	var c *Conn
	rc, err := rdmacm.Dial(ctx, address, cmConfig(cfg, func(rc *rdmacm.Conn, pd []byte) (err error) {
		c, err = newConn(rc, cfg, pd)
		return err
	}, func() { c.releaseAll() }))
	if err != nil { // rdmacm ran Release if it ran Setup
		return nil, dialErr(address, err)
	}
	peer, err := parseHello(rc.PrivateData())
	if err != nil {
		rc.Close()
		return nil, dialErr(address, err)
	}
	c.start(peer)
	return c, nil
}

// dialErr is err as net.Dial reports it: a *net.OpError for the dial,
// holding rdmacm's error without its own "dial address" (which would say
// both twice), and a bad address as the *net.AddrError under it.
func dialErr(address string, err error) error {
	var addr net.Addr
	if ap, perr := netip.ParseAddrPort(address); perr == nil {
		addr = Addr{ap}
	}
	var ae *net.AddrError
	if oe, ok := err.(*rdmacm.OpError); ok && oe.Op == "dial" {
		err = oe.Err
	}
	if errors.As(err, &ae) {
		err = ae
	}
	return &net.OpError{Op: "dial", Net: network, Addr: addr, Err: err}
}

// ListenConfig makes Listeners; its zero value is the defaults.
type ListenConfig struct {
	// Config sizes each accepted connection's buffers.
	Config Config
	// Backlog is how many connections, made and not yet taken by Accept,
	// the Listener holds; 0 means 128.
	Backlog int
}

// Listen listens on address ("192.0.2.1:7471"; port 0 picks one) on the
// network "rdma".
func Listen(nw, address string) (net.Listener, error) {
	var lc ListenConfig
	return lc.Listen(context.Background(), nw, address)
}

// handshakeTimeout bounds the making of one accepted connection.
const handshakeTimeout = 10 * time.Second

// Listen listens on address on the network "rdma"; ctx bounds the
// listen, not the Listener.
func (lc *ListenConfig) Listen(ctx context.Context, nw, address string) (net.Listener, error) {
	if err := checkNetwork("listen", nw, address); err != nil {
		return nil, err
	}
	backlog := lc.Backlog
	if backlog <= 0 {
		backlog = 128
	}
	cml, err := rdmacm.Listen(ctx, address, &rdmacm.Config{Backlog: backlog})
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	l := &Listener{l: cml, cfg: lc.Config.withDefaults(), addr: Addr{cml.Addr()},
		conns: make(chan *Conn, backlog), done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

// Listener accepts rdmanet connections: a net.Listener. A goroutine of
// its own takes each connection request and makes the connection, so a
// slow peer holds back no other.
type Listener struct {
	l      *rdmacm.Listener
	cfg    Config
	addr   Addr
	conns  chan *Conn
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	err    error // why serve stopped
	closed bool
}

// serve takes the connection requests.
func (l *Listener) serve() {
	defer l.wg.Done()
	for {
		req, err := l.l.AcceptRequest(l.ctx)
		if err != nil {
			l.mu.Lock()
			if l.err == nil {
				l.err = err
			}
			l.mu.Unlock()
			close(l.done)
			return
		}
		l.wg.Add(1)
		go l.handshake(req)
	}
}

// handshake answers one request, and queues the connection it makes.
func (l *Listener) handshake(req *rdmacm.Request) {
	defer l.wg.Done()
	peer, err := parseHello(req.PrivateData())
	if err != nil {
		req.Reject(nil)
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, handshakeTimeout)
	defer cancel()
	var c *Conn
	if _, err := req.Accept(ctx, cmConfig(l.cfg, func(rc *rdmacm.Conn, pd []byte) (err error) {
		c, err = newConn(rc, l.cfg, pd)
		return err
	}, func() { c.releaseAll() })); err != nil { // rdmacm ran Release if it ran Setup
		return
	}
	c.start(peer)
	select {
	case l.conns <- c:
	case <-l.ctx.Done():
		c.Close()
	}
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
	}
	select { // made before the listener stopped
	case c := <-l.conns:
		return c, nil
	default:
	}
	l.mu.Lock()
	err := l.err
	if l.closed {
		err = net.ErrClosed
	}
	l.mu.Unlock()
	return nil, &net.OpError{Op: "accept", Net: network, Addr: l.addr, Err: err}
}

// Close stops listening; connections already accepted stay, those made
// and not yet accepted are closed. Accept waiting returns an error
// wrapping net.ErrClosed.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return &net.OpError{Op: "close", Net: network, Addr: l.addr, Err: net.ErrClosed}
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	err := l.l.Close()
	l.wg.Wait()
	for {
		select {
		case c := <-l.conns:
			c.Close()
			continue
		default:
		}
		break
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return &net.OpError{Op: "close", Net: network, Addr: l.addr, Err: fmt.Errorf("listener: %w", err)}
	}
	return nil
}

// Addr returns the address listened on.
func (l *Listener) Addr() net.Addr { return l.addr }
