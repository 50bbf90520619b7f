package rdmacm

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/ucma"
	"github.com/goverbs/goverbs/uverbs"
)

// UDConn is a UD QP that the rdma_cm introduced to a peer over
// RDMA_PS_UDP (a SIDR exchange): the QP (UD, in RTS), the CQ its send and
// receive queues share with a completion channel, the PD, and, on the
// side that dialed, the peer to send to (Peer). The side that accepted
// learns where the peer is from its first datagram (ReplyTo), as
// rdma-core's udaddy does: the request carries no QP number.
//
// Datagrams are unreliable and unconnected: there is no disconnect, and
// Close just destroys. A UD receive needs uverbs.GRHSize bytes before the
// payload (uverbs.UDRecvSize). Its methods are safe for concurrent use.
type UDConn struct {
	c    *Conn // the ID, channel, QP, CQ and PD; its cfg, names, addresses and closed mark
	qkey uint32
	port uint8
	peer UDPeer
	mc   *membership // JoinMulticast's group, or nil
}

// DialUD makes a UD QP and introduces it to the UD listener at address
// ("192.0.2.1:7174") as librdmacm does in RDMA_PS_UDP: rdma_resolve_addr,
// rdma_resolve_route, rdma_create_qp (a UD QP in RTS, its Q_Key from the
// CM) and rdma_connect (a SIDR request, with cfg.PrivateData: at most
// MaxConnectPrivateDataUD bytes). It returns once the peer's ESTABLISHED
// names its QP number and Q_Key and the address vector to it, from which
// DialUD makes the AH of Peer. ctx bounds the whole; cfg may be nil (its
// RC fields are ignored; SetupUD runs before the request).
//
// A refusal (nobody listens, or the peer's Request.Reject) is an error
// wrapping a *SIDRError, which errors.Is treats as syscall.ECONNREFUSED.
func DialUD(ctx context.Context, address string, cfg *Config) (*UDConn, error) {
	growStack()
	conn, err := dialRoute(ctx, address, cfg, PortSpaceUDP)
	if err != nil {
		return nil, err
	}
	u := &UDConn{c: conn}
	ok := false
	defer func() {
		if !ok {
			u.teardown()
		}
	}()
	if err := u.setup(); err != nil {
		return nil, err
	}
	if err := conn.id.Connect(&ConnParam{PrivateData: conn.cfg.PrivateData}); err != nil {
		return nil, err
	}
	p, err := u.awaitEstablished(ctx)
	if err != nil {
		return nil, err
	}
	ah, err := conn.pd.NewAH(p.AH)
	if err != nil {
		return nil, &OpError{Op: "create ah", Device: conn.name, Err: err}
	}
	u.peer = UDPeer{QPN: p.QPNum, QKey: p.QKey, AH: ah}
	conn.private = p.PrivateData
	conn.start()
	ok = true
	return u, nil
}

// awaitEstablished waits for the SIDR reply, ESTABLISHED (the kernel's:
// UD has no RTU), and returns a copy of its UD parameters.
func (u *UDConn) awaitEstablished(ctx context.Context) (UDParam, error) {
	e, err := u.c.awaitEvent(ctx, "connect", EventEstablished)
	return e.ud, err
}

// setup makes the UD QP (in RTS once attached), its CQ and channel, and
// runs Config.SetupUD.
func (u *UDConn) setup() error {
	c := u.c
	if err := c.setup(); err != nil {
		return err
	}
	a, _, err := c.id.InitQPAttr(uverbs.QPInit)
	if err != nil {
		return err
	}
	u.qkey, u.port = a.QKey, a.Port
	if c.cfg.SetupUD != nil {
		if err := c.cfg.SetupUD(u); err != nil {
			return &OpError{Op: "setup", Device: c.name, Err: err}
		}
	}
	return nil
}

// readyUDQP takes a UD QP in INIT to RTR and RTS, SQ PSN 0, as
// librdmacm's ucma_init_ud_qp does.
func readyUDQP(qp *uverbs.QP) error {
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPRTR}, uverbs.QPAttrState); err != nil {
		return err
	}
	return qp.Modify(&uverbs.QPAttr{State: uverbs.QPRTS}, uverbs.QPAttrState|uverbs.QPAttrSQPSN)
}

// fillUD copies the kernel's UD parameters into e (Event.UD, and
// Param's PrivateData and QPNum), its private data into e's own buffer.
func (e *Event) fillUD(k *ucma.Event) {
	p := k.UDParam()
	n := copy(e.ev.pdata[:], p.PrivateData)
	e.UD = UDParam{PrivateData: e.ev.pdata[:n:n], QPNum: p.QPNum, QKey: p.QKey, AH: ahAttrFromKernel(&p.AH)}
	e.Param = ConnParam{PrivateData: e.UD.PrivateData, QPNum: p.QPNum}
}

// QP returns the UD QP, in RTS.
func (u *UDConn) QP() *uverbs.QP { return u.c.qp }

// CQ returns the completion queue the QP's send and receive queues share.
func (u *UDConn) CQ() *cq.CQ { return u.c.cq }

// CompChannel returns the CQ's completion channel.
func (u *UDConn) CompChannel() *cq.Channel { return u.c.cc }

// PD returns the QP's protection domain (see Conn.PD: close the MRs
// registered on it before the UDConn).
func (u *UDConn) PD() *uverbs.PD { return u.c.pd }

// QKey returns the QP's own Q_Key, the one the rdma_cm gave it (in
// RDMA_PS_UDP 0x01234567 on both sides).
func (u *UDConn) QKey() uint32 { return u.qkey }

// Peer returns where DialUD's peer is: its QP number, Q_Key and an AH to
// it, which the UDConn owns and closes. On an accepted UDConn it is the
// zero UDPeer: use ReplyTo.
func (u *UDConn) Peer() UDPeer { return u.peer }

// LocalAddr returns the local address and port.
func (u *UDConn) LocalAddr() netip.AddrPort { return u.c.local }

// RemoteAddr returns the peer's address and port.
func (u *UDConn) RemoteAddr() netip.AddrPort { return u.c.remote }

// PrivateData returns the private data the peer sent: its reply's
// (DialUD, 136 bytes) or its request's (Accept, 180), the message's
// whole field.
func (u *UDConn) PrivateData() []byte { return u.c.private }

// ReplyTo returns the peer that sent the datagram wc completed, whose
// receive buffer buf begins with the GRH (ibv_create_ah_from_wc): the
// sender's QP number (wc.SrcQP), this QP's Q_Key (the rdma_cm gives both
// sides the same), and a new AH to it, the caller's to close.
func (u *UDConn) ReplyTo(wc cq.WC, buf []byte) (UDPeer, error) {
	ah, err := u.c.pd.NewAHFromWC(wc, buf, u.port)
	if err != nil {
		return UDPeer{}, rewrap("create ah", u.c.name, err)
	}
	return UDPeer{QPN: wc.SrcQP, QKey: u.qkey, AH: ah}, nil
}

// Close destroys the peer's AH, the QP, the CQ and its channel, and the
// ID (rdma_destroy_qp, rdma_destroy_id), after leaving the multicast
// group JoinMulticast joined; UD has no disconnect. A second Close
// returns ErrClosed.
func (u *UDConn) Close() error {
	if err := u.c.markClosed(); err != nil {
		return err
	}
	var err error
	if u.mc != nil && !u.mc.isLeft() {
		err = u.leave()
	}
	if terr := u.teardown(); err == nil {
		err = terr
	}
	return err
}

func (u *UDConn) teardown() error {
	var err error
	if u.peer.AH != nil {
		err = u.peer.AH.Close()
	}
	if terr := u.c.teardown(); err == nil {
		err = terr
	}
	return err
}

// UDListener listens for UD requests (SIDR) on an address and port in
// RDMA_PS_UDP. Its methods are safe for concurrent use.
type UDListener struct {
	l *Listener
}

// ListenUD listens on address ("192.0.2.1:7174"; an empty host is the
// IPv4 wildcard, port 0 a free one) in RDMA_PS_UDP, as Listen does in
// TCP's. cfg, which may be nil, gives what Accept gives each UDConn
// (PrivateData at most MaxAcceptPrivateDataUD bytes).
func ListenUD(ctx context.Context, address string, cfg *Config) (*UDListener, error) {
	l, err := listenPS(ctx, address, cfg, PortSpaceUDP)
	if err != nil {
		return nil, err
	}
	return &UDListener{l: l}, nil
}

// Addr returns the address and port the listener is bound to.
func (l *UDListener) Addr() netip.AddrPort { return l.l.Addr() }

// Accept waits for the next UD request and accepts it with the
// listener's Config (Request.AcceptUD).
func (l *UDListener) Accept(ctx context.Context) (*UDConn, error) {
	r, err := l.l.AcceptRequest(ctx)
	if err != nil {
		return nil, err
	}
	return r.AcceptUD(ctx, nil)
}

// AcceptRequest waits for the next UD request and returns it unanswered:
// AcceptUD or Reject it (Reject's private data: at most
// MaxAcceptPrivateDataUD bytes).
func (l *UDListener) AcceptRequest(ctx context.Context) (*Request, error) {
	return l.l.AcceptRequest(ctx)
}

// Close stops listening, as Listener.Close does; UDConns already
// accepted stay.
func (l *UDListener) Close() error { return l.l.Close() }

// AcceptUD accepts a UD listener's request with cfg (nil: the
// listener's Config): it makes the UD QP (in RTS), runs Config.SetupUD,
// and answers with the QP's number and Q_Key and cfg.PrivateData (at
// most MaxAcceptPrivateDataUD bytes), the SIDR reply (rdma_accept). UD
// has no ESTABLISHED on this side: the UDConn is returned at once. The
// peer's QP number is not in the request; ReplyTo learns it from the
// peer's first datagram.
func (r *Request) AcceptUD(ctx context.Context, cfg *Config) (*UDConn, error) {
	const op = "accept"
	growStack()
	if !r.id.ps.ud() {
		return nil, &OpError{Op: op, Device: r.remote.String(), Err: fmt.Errorf("not a UD request: use Accept: %w", errInvalid)}
	}
	conn, err := r.migrate(ctx, op, cfg)
	if err != nil {
		return nil, err
	}
	u := &UDConn{c: conn}
	ok := false
	defer func() {
		if !ok {
			u.teardown()
		}
	}()
	if err := u.setup(); err != nil {
		_ = r.id.Reject(nil)
		return nil, err
	}
	if err := r.id.Accept(&ConnParam{PrivateData: conn.cfg.PrivateData}); err != nil {
		return nil, err
	}
	conn.start()
	ok = true
	return u, nil
}
