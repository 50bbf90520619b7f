package uverbs

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
)

// FindGID returns the first entry of port's GID table of type typ whose
// address is addr (an IPv4 address matches its IPv4-mapped GID), or, for
// the zero netip.Addr, the first entry of type typ. Programs use it
// instead of a hard-coded GID index: on RoCE the table's layout depends
// on the netdev's addresses. No such entry gives an error wrapping ENOENT
// that lists the table.
func (c *Context) FindGID(port int, typ GIDType, addr netip.Addr) (GIDEntry, error) {
	const op = "find gid"
	table, err := c.GIDTable(port)
	if err != nil {
		return GIDEntry{}, c.opErr(op, innerErr(err))
	}
	want := addr.WithZone("").Unmap()
	for _, e := range table {
		if e.Type == typ && (!addr.IsValid() || e.GID.Addr().Unmap() == want) {
			return e, nil
		}
	}
	what := "any address"
	if addr.IsValid() {
		what = want.String()
	}
	have := make([]string, len(table))
	for i, e := range table {
		have[i] = fmt.Sprintf("%d: %v %v", e.Index, e.Type, e.GID)
	}
	return GIDEntry{}, c.opErr(op, fmt.Errorf("port %d has no %v GID for %s (table: %s): %w",
		port, typ, what, strings.Join(have, ", "), unix.ENOENT))
}

// innerErr strips the *OpError of a public method called from another,
// whose own OpError names the device already.
func innerErr(err error) error {
	var oe *OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

// route is what ConnectRC and NewAHTo work out from the endpoints and
// the port: the address vector to the remote side, and the path MTU.
func (c *Context) route(op string, local, remote Endpoint, o *ConnectOptions) (AHAttr, MTU, error) {
	if err := checkPort(int(o.Port)); err != nil {
		return AHAttr{}, 0, c.opErr(op, err)
	}
	if err := c.use(op); err != nil {
		return AHAttr{}, 0, err
	}
	pa, err := c.queryPort(op, int(o.Port))
	c.done()
	if err != nil {
		return AHAttr{}, 0, err
	}
	mtu := o.PathMTU
	if mtu == 0 {
		mtu = pa.ActiveMTU
		for _, m := range []MTU{local.MTU, remote.MTU} {
			if m != 0 && m < mtu {
				mtu = m
			}
		}
	}
	a := AHAttr{DLID: remote.LID, SL: o.SL, Port: o.Port}
	// As ibv_rc_pingpong: a GRH when the remote GID has an interface id.
	global := [8]byte(remote.GID[8:]) != [8]byte{}
	if !global && pa.LinkLayer == LinkLayerEthernet {
		return AHAttr{}, 0, c.opErr(op, fmt.Errorf("the remote endpoint has no GID, which RoCE needs (port %d is Ethernet): %w", o.Port, unix.EINVAL))
	}
	if !global {
		return a, mtu, nil
	}
	idx := o.GIDIndex
	if idx == 0 {
		if local.GID.IsZero() {
			return AHAttr{}, 0, c.opErr(op, fmt.Errorf("the local endpoint has no GID to send from (Context.FindGID finds one): %w", unix.EINVAL))
		}
		if idx, err = c.gidIndex(int(o.Port), local.GID, o.GIDType); err != nil {
			return AHAttr{}, 0, c.opErr(op, err)
		}
	}
	if idx < 0 || idx > math.MaxUint8 {
		return AHAttr{}, 0, c.opErr(op, fmt.Errorf("GID index %d out of range: %w", idx, unix.EINVAL))
	}
	a.IsGlobal = true
	a.GRH = GlobalRoute{DGID: remote.GID, SGIDIndex: uint8(idx), HopLimit: o.HopLimit,
		TrafficClass: o.TrafficClass, FlowLabel: o.FlowLabel}
	return a, mtu, nil
}

// gidIndex finds gid in port's table: the entry of type typ if there are
// several, else the only one.
func (c *Context) gidIndex(port int, gid GID, typ GIDType) (int, error) {
	table, err := c.GIDTable(port)
	if err != nil {
		return 0, innerErr(err)
	}
	idx := -1
	for _, e := range table {
		if e.GID != gid {
			continue
		}
		if e.Type == typ {
			return e.Index, nil
		}
		if idx < 0 {
			idx = e.Index
		}
	}
	if idx < 0 {
		return 0, fmt.Errorf("the local GID %v is not in port %d's GID table: %w", gid, port, unix.ENOENT)
	}
	return idx, nil
}

// ConnectRC connects an RC (or UC) QP to its peer: it takes the QP from
// RESET through INIT and RTR to RTS with the attributes each transition
// needs (ibv_modify_qp three times, as ibv_rc_pingpong does), from the
// two Endpoints and the options (nil for the defaults, see
// [ConnectOptions]). local.PSN is where the send queue starts, remote.PSN
// where the receive queue does; remote.QPN is the peer. The source GID
// index is local.GID's in the port's table unless opts names one.
//
// The QP must be new or in RESET (or left in INIT by a ConnectRC that
// failed later: INIT→INIT is a transition too). On an error it stays in
// the state it reached (Modify it to QPReset to start over), and the
// error names the transition and the attributes it set.
//
// Post receives after ConnectRC (a QP in RESET takes none) and before
// the peer may send: ibv_rc_pingpong's server, for one, connects and
// posts before it answers the client.
func (q *QP) ConnectRC(local, remote Endpoint, opts *ConnectOptions) error {
	const op = "connect rc"
	ctx := q.pd.ctx
	if q.typ != RC && q.typ != UC {
		return ctx.opErr(op, fmt.Errorf("a %v QP: ConnectRC connects RC and UC QPs (ConnectUD readies UD ones): %w", q.typ, unix.EINVAL))
	}
	if remote.QPN > 0xffffff || local.PSN > 0xffffff || remote.PSN > 0xffffff {
		return ctx.opErr(op, fmt.Errorf("remote QPN %#x, local PSN %#x, remote PSN %#x: each has 24 bits: %w",
			remote.QPN, local.PSN, remote.PSN, unix.EINVAL))
	}
	o := opts.withDefaults(q.typ)
	av, mtu, err := ctx.route(op, local, remote, &o)
	if err != nil {
		return err
	}
	rc := q.typ == RC
	steps := [3]struct {
		attr QPAttr
		mask QPAttrMask
		hint string
	}{
		{QPAttr{State: QPInit, Port: o.Port, PKeyIndex: o.PKeyIndex, AccessFlags: o.Access},
			QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags,
			fmt.Sprintf("port %d, P_Key index %d, access %#x; is the QP new or in RESET?", o.Port, o.PKeyIndex, uint32(o.Access))},
		{QPAttr{State: QPRTR, PathMTU: mtu, DestQPN: remote.QPN, RQPSN: remote.PSN, AH: av,
			MaxDestRdAtomic: o.MaxDestRdAtomic, MinRNRTimer: o.MinRNRTimer},
			QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN,
			fmt.Sprintf("remote QPN %#x, path MTU %v, remote GID %v via source GID index %d (global %t), LID %d, max dest rd atomic %d",
				remote.QPN, mtu, remote.GID, av.GRH.SGIDIndex, av.IsGlobal, remote.LID, o.MaxDestRdAtomic)},
		{QPAttr{State: QPRTS, SQPSN: local.PSN, Timeout: o.Timeout, RetryCnt: o.RetryCnt, RNRRetry: o.RNRRetry,
			MaxRdAtomic: o.MaxRdAtomic},
			QPAttrState | QPAttrSQPSN,
			fmt.Sprintf("SQ PSN %#x, timeout %d, retry count %d, RNR retry %d, max rd atomic %d",
				local.PSN, o.Timeout, o.RetryCnt, o.RNRRetry, o.MaxRdAtomic)},
	}
	if rc {
		steps[1].mask |= QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
		steps[2].mask |= QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMaxQPRdAtomic
	}
	from := QPReset
	for i := range steps {
		s := &steps[i]
		if err := q.modifyStep(op, from, &s.attr, s.mask, s.hint); err != nil {
			return err
		}
		from = s.attr.State
	}
	return nil
}

// ConnectUD readies a UD QP: RESET to INIT with its port, P_Key index
// and Q_Key (opts.QKey, default DefaultQKey), then RTR, then RTS with
// local.PSN. It sends with an AH per destination ([PD.NewAHTo]).
func (q *QP) ConnectUD(local Endpoint, opts *ConnectOptions) error {
	const op = "connect ud"
	ctx := q.pd.ctx
	if q.typ != UD {
		return ctx.opErr(op, fmt.Errorf("a %v QP: ConnectUD readies UD QPs (ConnectRC connects RC and UC ones): %w", q.typ, unix.EINVAL))
	}
	if local.PSN > 0xffffff {
		return ctx.opErr(op, fmt.Errorf("PSN %#x wider than 24 bits: %w", local.PSN, unix.EINVAL))
	}
	o := opts.withDefaults(q.typ)
	if err := q.modifyStep(op, QPReset, &QPAttr{State: QPInit, Port: o.Port, PKeyIndex: o.PKeyIndex, QKey: o.QKey},
		QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrQKey,
		fmt.Sprintf("port %d, P_Key index %d, Q_Key %#x; is the QP new or in RESET?", o.Port, o.PKeyIndex, o.QKey)); err != nil {
		return err
	}
	if err := q.modifyStep(op, QPInit, &QPAttr{State: QPRTR}, QPAttrState, ""); err != nil {
		return err
	}
	return q.modifyStep(op, QPRTR, &QPAttr{State: QPRTS, SQPSN: local.PSN}, QPAttrState|QPAttrSQPSN,
		fmt.Sprintf("SQ PSN %#x", local.PSN))
}

// modifyStep is one transition of ConnectRC or ConnectUD, its error
// naming the transition and what it set.
func (q *QP) modifyStep(op string, from QPState, attr *QPAttr, mask QPAttrMask, hint string) error {
	kerr, err := q.modify("modify qp", attr, mask)
	if err != nil {
		return q.pd.ctx.opErr(op, fmt.Errorf("%v→%v: %w", from, attr.State, innerErr(err)))
	}
	if kerr != nil {
		if hint != "" {
			hint = " (check: " + hint + ")"
		}
		return q.pd.ctx.opErr(op, fmt.Errorf("%v→%v, attribute mask %#x: %w%s", from, attr.State, uint32(mask), kerr, hint))
	}
	return nil
}

// NewAHTo creates the address handle a UD QP sends to remote with: the
// address vector ConnectRC would use (the remote GID and LID, the source
// GID index local.GID has in the port's table or opts.GIDIndex, the hop
// limit, SL, traffic class and flow label of opts). Send with
// SendWR{AH: ah, RemoteQPN: remote.QPN, RemoteQKey: the peer's Q_Key}.
func (p *PD) NewAHTo(local, remote Endpoint, opts *ConnectOptions) (*AH, error) {
	const op = "create ah"
	o := opts.withDefaults(UD)
	av, _, err := p.ctx.route(op, local, remote, &o)
	if err != nil {
		return nil, err
	}
	return p.NewAH(av)
}

// NewAHFromWC creates the address handle that answers the sender of the
// datagram wc completed on port (ibv_create_ah_from_wc): grh is the
// receive buffer's start, where a UD QP puts the GRH (GRHSize bytes;
// over RoCE v2 on IPv4, an IPv4 header in its last 20). The AH sends to
// the datagram's source GID from the local GID it came to (over IPv4,
// that GID's RoCE v2 entry), with the GRH's traffic class and flow label
// and a hop limit of 255; without a GRH (wc.Flags lacks cq.WithGRH: an
// InfiniBand datagram from the same subnet) to the source LID. Reply
// with SendWR{AH: ah, RemoteQPN: wc.SrcQP, RemoteQKey: the Q_Key}. A
// completion that is no successful receive is an error wrapping EINVAL.
func (p *PD) NewAHFromWC(wc cq.WC, grh []byte, port uint8) (*AH, error) {
	const op = "create ah from wc"
	if wc.Status != cq.Success || wc.Opcode&cq.RecvBit == 0 {
		return nil, p.ctx.opErr(op, fmt.Errorf("completion %v of opcode %v is no received datagram: %w", wc.Status, wc.Opcode, unix.EINVAL))
	}
	attr := AHAttr{DLID: wc.SLID, SL: wc.SL, SrcPathBits: wc.DLIDPathBits, Port: port}
	if wc.Flags&cq.WithGRH != 0 {
		g, err := ParseGRH(grh)
		if err != nil {
			return nil, p.ctx.opErr(op, err)
		}
		gids, err := p.ctx.GIDTable(int(port))
		if err != nil {
			return nil, err
		}
		idx := -1
		for _, e := range gids {
			if e.GID == g.DGID && (idx < 0 || g.IPVersion == 4 && e.Type == GIDTypeRoCEv2) {
				idx = e.Index
			}
		}
		if idx < 0 {
			return nil, p.ctx.opErr(op, fmt.Errorf("the datagram's destination GID %v is not in port %d's table: %w", g.DGID, port, unix.EINVAL))
		}
		attr.IsGlobal = true
		attr.GRH = GlobalRoute{DGID: g.SGID, SGIDIndex: uint8(idx), HopLimit: 0xff, TrafficClass: g.TrafficClass, FlowLabel: g.FlowLabel}
	}
	ah, err := p.NewAH(attr)
	if err != nil {
		return nil, p.ctx.opErr(op, errors.Unwrap(err))
	}
	return ah, nil
}

// PostSendInline posts one send work request whose payload is data,
// copied into the send queue before it returns (SendInline is set): data
// needs no memory region and may be reused at once. wr gives the rest
// (WRID, Opcode: a send or an RDMA write, with or without immediate;
// Flags; Imm; RemoteAddr and RKey; AH, RemoteQPN and RemoteQKey for UD);
// its SGL must be empty. len(data) may be at most the QP's
// Cap().MaxInlineData.
//
// It allocates nothing, and takes no unsafe pointer from the caller:
// data is read while the call holds it, so it cannot move or be freed
// under the post. (data escapes to the heap for that reason: pass a
// buffer you reuse, not a new slice, to keep a loop allocation-free.)
// Safe for concurrent use, as PostSend.
func (q *QP) PostSendInline(wr SendWR, data []byte) error {
	const op = "post send"
	if wr.SGL != nil {
		return q.pd.ctx.opErr(op, fmt.Errorf("inline: data holds the payload, so SGL must be empty: %w", unix.EINVAL))
	}
	if uint64(len(data)) > math.MaxUint32 {
		return q.pd.ctx.opErr(op, fmt.Errorf("inline: %d bytes: %w", len(data), unix.EINVAL))
	}
	q.sendMu.Lock()
	if q.stop != nil { // ErrClosed, or ErrDeviceFatal
		return q.stopped(op, &q.sendMu)
	}
	// The request and its one SGE live in the QP, so nothing is
	// allocated; data is held in the QP for the call, which keeps it on
	// the heap (a goroutine's stack may move, the heap does not) and
	// alive while its address is a plain number in the SGE.
	q.inlineData = data
	q.inlineWR[0] = wr
	w := &q.inlineWR[0]
	w.Flags |= SendInline
	if len(data) > 0 {
		q.inlineSGE[0] = SGE{Addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(data)))), Length: uint32(len(data))}
		w.SGL = q.inlineSGE[:]
	}
	_, err := q.p.PostSend(providerSendWRs(q.inlineWR[:]))
	q.inlineWR[0] = SendWR{} // keep no AH alive
	q.inlineData = nil
	q.sendMu.Unlock()
	runtime.KeepAlive(data)
	if err != nil {
		return q.pd.ctx.opErr(op, err)
	}
	return nil
}
