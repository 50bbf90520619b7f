package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/ucma"
	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// errENOTSUPP is the kernel's internal ENOTSUPP (524), which the rdma_cm
// passes to user space as it is.
const errENOTSUPP = syscall.Errno(524)

// membership is a UDConn's multicast group: the kernel's join and the
// group's GID and LID its QP is attached to (none for a send-only join).
type membership struct {
	mu       sync.Mutex
	id       uint32 // the join's number (JOIN_MCAST), for LEAVE_MCAST
	gid      uverbs.GID
	lid      uint16
	attached bool
	left     bool
}

// JoinMulticast joins the IP multicast group group (an IPv4 or IPv6
// multicast address, "239.1.2.3" or "ff0e::1:2:3") on the RDMA device
// whose netdev has the address local, as librdmacm's rdma_resolve_addr
// and rdma_join_multicast do in RDMA_PS_UDP: it makes a UD QP (in RTS,
// with its CQ, channel and PD, as DialUD does), joins, and attaches the
// QP to the group, so that datagrams sent to the group reach its
// receive queue (post receives in Config.SetupUD, before the join).
// Peer is the group: its QP number (0xFFFFFF), Q_Key and an AH, to send
// to every member. With Config.SendOnly the join is a send-only full
// member's and the QP is not attached. Leave leaves the group; Close
// leaves it too.
//
// A group address that is not multicast, or local and group of different
// families, is EINVAL before anything is sent. An IPv6 group on a RoCE v2
// port (rxe's only kind) is an error wrapping ErrNotSupported: the
// kernel joins IPv6 groups on RoCE v1 and InfiniBand ports only. ctx
// bounds the join.
func JoinMulticast(ctx context.Context, local, group string, cfg *Config) (*UDConn, error) {
	const op = "join multicast"
	growStack()
	if err := ctx.Err(); err != nil {
		return nil, &OpError{Op: op, Device: group, Err: ctxErr(err)}
	}
	src, err := netip.ParseAddr(local)
	if err != nil {
		return nil, &OpError{Op: op, Device: group, Err: fmt.Errorf("local address %s: %w", errs.Quote(local), errInvalid)}
	}
	grp, err := netip.ParseAddr(group)
	if err != nil {
		return nil, &OpError{Op: op, Device: group, Err: fmt.Errorf("group %s: %w", errs.Quote(group), errInvalid)}
	}
	src, grp = src.Unmap(), grp.Unmap()
	switch {
	case !grp.IsMulticast():
		return nil, &OpError{Op: op, Device: group, Err: fmt.Errorf("%v is not a multicast address: %w", grp, errInvalid)}
	case src.Is4() != grp.Is4():
		return nil, &OpError{Op: op, Device: group, Err: fmt.Errorf("local address %v and group %v are of different families: %w", src, grp, errInvalid)}
	}
	c := cfg.withDefaults()
	h, err := acquireHub()
	if err != nil {
		return nil, err
	}
	conn := newConn(h, c, grp.String())
	u := &UDConn{c: conn, mc: new(membership)}
	ok := false
	defer func() {
		if !ok {
			u.teardown()
		}
	}()
	id, err := h.ch.NewID(PortSpaceUDP)
	if err != nil {
		return nil, err
	}
	conn.id = id
	id.sink.Store(conn)
	id.setName(conn.name)
	// Bound to local first, the ID resolves the group on local's device.
	from := netip.AddrPortFrom(src, 0)
	if err := id.Bind(from); err != nil {
		return nil, err
	}
	if err := id.ResolveAddr(from, netip.AddrPortFrom(grp, 0), kernelTimeout(ctx)); err != nil {
		return nil, err
	}
	if _, err := conn.await(ctx, "resolve addr", EventAddrResolved); err != nil {
		return nil, err
	}
	if err := u.setup(); err != nil {
		return nil, err
	}
	flags := uint16(uapi.RDMA_MC_JOIN_FLAG_FULLMEMBER)
	if c.SendOnly {
		flags = uapi.RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
	}
	if err := id.do(op, func(k *ucma.Conn, kid uint32) (err error) {
		u.mc.id, err = k.JoinMcast(kid, id.uid, ucma.IPSockaddr(netip.AddrPortFrom(grp, 0)), flags)
		return err
	}); err != nil {
		if errors.Is(err, errENOTSUPP) && grp.Is6() {
			// cma_iboe_join_multicast joins IPv6 groups on RoCE v1
			// ports only; rxe is RoCE v2.
			err = &OpError{Op: op, Device: conn.name, Err: fmt.Errorf(
				"an IPv6 group on a RoCE v2 port (the kernel's rdma_cm joins IPv4 groups only there): %w (%w)", ErrNotSupported, errENOTSUPP)}
		}
		return nil, err
	}
	e, err := conn.awaitEvent(ctx, op, EventMulticastJoin)
	if err != nil {
		u.mc.left = true // the kernel's join goes with the ID
		return nil, err
	}
	p := e.ud
	u.mc.gid, u.mc.lid = p.AH.GRH.DGID, p.AH.DLID
	if !c.SendOnly {
		if err := conn.qp.AttachMcast(u.mc.gid, u.mc.lid); err != nil {
			return nil, &OpError{Op: op, Device: conn.name, Err: err}
		}
		u.mc.attached = true
	}
	ah, err := conn.pd.NewAH(p.AH)
	if err != nil {
		return nil, &OpError{Op: "create ah", Device: conn.name, Err: err}
	}
	u.peer = UDPeer{QPN: p.QPNum, QKey: p.QKey, AH: ah}
	conn.start()
	ok = true
	return u, nil
}

// Leave leaves the multicast group JoinMulticast joined
// (rdma_leave_multicast): the QP is detached from it and the kernel's
// membership ends; the UDConn stays open, and its Peer still sends to
// the group. A UDConn that joined no group, or one that left it
// already, is an error (EINVAL, ErrClosed); so is a closed one.
func (u *UDConn) Leave() error {
	const op = "leave multicast"
	if u.mc == nil {
		return &OpError{Op: op, Device: u.c.name, Err: fmt.Errorf("the UDConn joined no multicast group: %w", errInvalid)}
	}
	if u.c.isClosed() {
		return &OpError{Op: op, Device: u.c.name, Err: ErrClosed}
	}
	return u.leave()
}

// isLeft reports whether the group was left.
func (m *membership) isLeft() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.left
}

// leave leaves the group once; Close and Leave share it.
func (u *UDConn) leave() error {
	const op = "leave multicast"
	m := u.mc
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left {
		return &OpError{Op: op, Device: u.c.name, Err: fmt.Errorf("the group was left: %w", ErrClosed)}
	}
	m.left = true
	var err error
	if m.attached {
		if derr := u.c.qp.DetachMcast(m.gid, m.lid); derr != nil {
			err = &OpError{Op: op, Device: u.c.name, Err: derr}
		}
		m.attached = false
	}
	if lerr := u.c.id.do(op, func(k *ucma.Conn, _ uint32) error {
		_, err := k.LeaveMcast(m.id)
		return err
	}); lerr != nil && err == nil {
		err = lerr
	}
	return err
}
