package mlx5model

import (
	"encoding/binary"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/uapi"
)

// Send WQE execution: parse the segments, check keys, ranges and rights,
// move the bytes, write the CQEs.

// span is registered memory the HCA reads or writes.
type span struct {
	p unsafe.Pointer
	n int
}

// result of one operation: a syndrome for the requester (0: success), and
// one for the responder's receive, which then completes in error.
type result struct {
	synd      uint8
	respErr   bool // the responder QP goes to error (an RC NAK it sent)
	asyncType uint32
	byteCnt   uint32
	rnr       bool // no receive posted: wait
}

// The IB RNR timer encodings, in microseconds (min_rnr_timer 0 is the
// longest).
var rnrMicros = [32]uint32{655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520}

// execWQE runs the send WQE at the QP's consumer index and returns its
// size in basic blocks; ok is false when it must wait (RNR).
func (d *Device) execWQE(q *qp, pend uint32) (uint32, bool) {
	idx := uint16(q.sqCI)
	ctrl := bytesAt(unsafe.Add(q.sq, uintptr(uint32(idx)&(q.sqCnt-1))*wqeBB), ctrlSize)
	opcode := ctrl[3]
	wqeIdx := be.Uint16(ctrl[1:])
	qpnDS := be.Uint32(ctrl[ctrlQPNDS:])
	ds := qpnDS & 0x3f
	fm := ctrl[ctrlFMCESE]
	var imm [4]byte
	copy(imm[:], ctrl[ctrlImm:])
	if wqeIdx != idx {
		d.violate("QP %#x: WQE at basic block %d carries index %d", q.qpn, idx, wqeIdx)
	}
	if qpnDS>>8 != q.qpn {
		d.violate("QP %#x: WQE %d carries QPN %#x", q.qpn, idx, qpnDS>>8)
	}
	if ds == 0 {
		d.violate("QP %#x: WQE %d has size 0", q.qpn, idx)
		ds = 1
	}
	nbb := (ds*16 + wqeBB - 1) / wqeBB
	if nbb > pend {
		d.violate("QP %#x: WQE %d of %d basic blocks runs past the doorbell record (%d posted)", q.qpn, idx, nbb, pend)
		nbb = pend
	}
	// The whole WQE, gathered across the end of the ring.
	n := int(ds) * 16
	if cap(q.scratch) < n {
		q.scratch = make([]byte, 1024)
	}
	w := q.scratch[:n]
	ring := bytesAt(q.sq, int(q.sqCnt)*wqeBB)
	off := int(uint32(idx)&(q.sqCnt-1)) * wqeBB
	for i := 0; i < n; {
		k := copy(w[i:], ring[off:])
		i += k
		off = 0
	}
	d.stats.WQEs++
	if q.umrFence && fm&(uapi.MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE|uapi.MLX5_WQE_CTRL_FENCE) == 0 {
		d.violate("QP %#x: WQE %d follows a UMR without a fence", q.qpn, idx)
	}
	q.umrFence = opcode == uapi.MLX5_OPCODE_UMR
	signaled := fm&uapi.MLX5_WQE_CTRL_CQ_UPDATE != 0
	if q.state == qpsErr {
		d.reqError(q, idx, opcode, uapi.MLX5_CQE_SYNDROME_WR_FLUSH_ERR, vendorFlush)
		return nbb, true
	}
	if s := d.inject[q.qpn]; len(s) > 0 {
		d.inject[q.qpn] = s[1:]
		d.reqError(q, idx, opcode, s[0], vendorDefault)
		d.qpError(q)
		return nbb, true
	}
	r := d.exec(q, opcode, w, imm, fm&uapi.MLX5_WQE_CTRL_SOLICITED != 0)
	if r.rnr {
		if !q.rnrWait {
			q.rnrWait, q.rnrSince = true, time.Now()
			d.stats.RNRWaits++
		}
		peer := d.qps[q.destQPN]
		if q.rnrRetry == 7 || peer == nil {
			return 0, false // 7: retry for ever
		}
		wait := time.Duration(rnrMicros[peer.minRNR&31]) * time.Microsecond * time.Duration(q.rnrRetry+1)
		if time.Since(q.rnrSince) < wait {
			return 0, false
		}
		r = result{synd: uapi.MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR}
	}
	q.rnrWait = false
	if r.synd != 0 {
		d.reqError(q, idx, opcode, r.synd, vendorDefault)
		d.qpError(q)
		return nbb, true
	}
	if signaled {
		var e [cqeSize]byte
		be.PutUint32(e[cqeSRQNUIdx:], q.uidxField())
		be.PutUint32(e[cqeByteCnt:], r.byteCnt)
		be.PutUint32(e[cqeSopDropQPN:], uint32(opcode)<<24|q.qpn)
		be.PutUint16(e[cqeWQECounter:], idx)
		e[cqeOpOwn] = uapi.MLX5_CQE_REQ << 4
		d.complete(q.scq, &e, false, false)
	}
	return nbb, true
}

// local resolves the data segments (or inline data) of a WQE to memory:
// lkeys of the QP's protection domain, ranges inside their regions, and
// local write rights when the HCA writes there.
func (d *Device) local(q *qp, segs []byte, write bool) ([]span, uint64, uint8) {
	var out []span
	var total uint64
	if len(segs) >= 4 && be.Uint32(segs)&uapi.MLX5_INLINE_SEG != 0 {
		if write {
			return nil, 0, uapi.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR // inline data has nowhere to go
		}
		n := int(be.Uint32(segs) &^ uapi.MLX5_INLINE_SEG)
		if 4+n > len(segs) {
			d.violate("QP %#x: inline data of %d bytes in a WQE with room for %d", q.qpn, n, len(segs)-4)
			return nil, 0, uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR
		}
		if n > int(q.cap.MaxInlineData) {
			d.violate("QP %#x: %d bytes inline, the QP was created for %d", q.qpn, n, q.cap.MaxInlineData)
		}
		b := segs[4 : 4+n]
		if n == 0 {
			return nil, 0, 0
		}
		return []span{{unsafe.Pointer(unsafe.SliceData(b)), n}}, uint64(n), 0
	}
	for len(segs) >= dataSegSize {
		s := segs[:dataSegSize]
		segs = segs[dataSegSize:]
		bc, lkey, addr := be.Uint32(s[dataByteCount:]), be.Uint32(s[dataLKey:]), be.Uint64(s[dataAddr:])
		if lkey == uapi.MLX5_INVALID_LKEY && bc == 0 {
			break // the end of a receive list
		}
		n := uint64(bc)
		if n == 0 {
			n = 1 << 31 // the device reads a byte count of 0 as 2 GiB
		}
		p, ok := d.mem(q.pd, nil, lkey, addr, n, func(a uint32) bool {
			return !write || a&uapi.IB_UVERBS_ACCESS_LOCAL_WRITE != 0
		})
		if !ok {
			return nil, 0, uapi.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR
		}
		out = append(out, span{p, int(n)})
		total += n
	}
	return out, total, 0
}

// mem finds n bytes at addr of the region key names, in protection domain
// p, if allowed says its rights suffice. A memory window's key is good
// for a peer's access only (responder, the QP it arrives at, not nil):
// while the window is bound, to that QP if it is of type 2, and within
// its range.
func (d *Device) mem(p *pd, responder *qp, key uint32, addr, n uint64, allowed func(uint32) bool) (unsafe.Pointer, bool) {
	m := d.mrs[key]
	if m == nil || m.pd != p || !allowed(m.access) {
		return nil, false
	}
	if m.win != nil && (responder == nil || !d.usable(m) || m.win.typ == 2 && m.win.qpn != responder.qpn) {
		return nil, false
	}
	if addr < m.iova || addr+n > m.iova+m.length || addr+n < addr {
		return nil, false
	}
	return unsafe.Add(m.base, uintptr(addr-m.iova)), true
}

// move copies src spans into dst spans; dst holds at least as much.
func move(dst, src []span) {
	di, doff := 0, 0
	for _, s := range src {
		sb := bytesAt(s.p, s.n)
		for len(sb) > 0 {
			for dst[di].n == doff {
				di, doff = di+1, 0
			}
			k := copy(bytesAt(unsafe.Add(dst[di].p, doff), dst[di].n-doff), sb)
			sb, doff = sb[k:], doff+k
		}
	}
}

// nextRecv returns the data segments of the receive WQE a QP takes next,
// from its receive queue or its SRQ, and the wqe_counter its CQE carries
// (the SRQ's WQE index); takeRecv consumes it.
func (q *qp) nextRecv() ([]byte, uint16) {
	if q.srq != nil {
		return q.srq.peek()
	}
	size := 1 << q.rqShift
	return bytesAt(unsafe.Add(q.buf, uintptr(q.rqCI&(q.rqCnt-1))*uintptr(size)), size), uint16(q.rqCI)
}

// takeRecv consumes the receive WQE nextRecv returned.
func (d *Device) takeRecv(q *qp) {
	if q.srq != nil {
		d.take(q.srq)
		return
	}
	q.rqCI++
}

// recvPosted reports whether a receive is posted: in the QP's receive
// queue, or in its SRQ.
func (q *qp) recvPosted() bool {
	if q.srq != nil {
		return q.srq.avail() != 0
	}
	return q.rqCnt != 0 && uint16(load32BE(q.db)) != uint16(q.rqCI)
}

func psnAdd(psn uint32, n uint32) uint32 { return (psn + n) & 0xffffff }

// packets is how many packets a message of n bytes takes at path MTU mtu.
func packets(n uint64, mtu uint8) uint32 {
	size := uint64(256) << (max(mtu, 1) - 1)
	return uint32(max((n+size-1)/size, 1))
}

// exec performs one operation.
func (d *Device) exec(q *qp, opcode uint8, w []byte, imm [4]byte, solicited bool) result {
	switch q.typ {
	case uapi.IB_UVERBS_QPT_UD:
		return d.execUD(q, opcode, w, imm, solicited)
	}
	off := ctrlSize
	var raddr []byte
	var atomic []byte
	switch opcode {
	case uapi.MLX5_OPCODE_NOP:
		return result{}
	case uapi.MLX5_OPCODE_UMR:
		return d.execUMR(q, w, imm)
	case uapi.MLX5_OPCODE_RDMA_WRITE, uapi.MLX5_OPCODE_RDMA_WRITE_IMM, uapi.MLX5_OPCODE_RDMA_READ:
		if len(w) < off+raddrSize {
			return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR}
		}
		raddr, off = w[off:off+raddrSize], off+raddrSize
	case uapi.MLX5_OPCODE_ATOMIC_CS, uapi.MLX5_OPCODE_ATOMIC_FA:
		if len(w) < off+raddrSize+atomicSize {
			return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR}
		}
		raddr, atomic, off = w[off:off+raddrSize], w[off+raddrSize:off+raddrSize+atomicSize], off+raddrSize+atomicSize
	case uapi.MLX5_OPCODE_SEND, uapi.MLX5_OPCODE_SEND_IMM, uapi.MLX5_OPCODE_SEND_INVAL:
	default:
		return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR}
	}
	rc := q.typ == uapi.IB_UVERBS_QPT_RC
	reads := opcode == uapi.MLX5_OPCODE_RDMA_READ || atomic != nil
	if !rc && (reads || opcode == uapi.MLX5_OPCODE_SEND_INVAL) {
		return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR}
	}
	src, length, synd := d.local(q, w[off:], reads)
	if synd != 0 {
		return result{synd: synd}
	}
	if length > portMaxMsg {
		return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR}
	}
	if atomic != nil && length != 8 {
		return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR}
	}
	// The wire: a connected peer in RTR or RTS, at the PSN it expects.
	peer := d.qps[q.destQPN]
	if peer == nil || peer.dead || peer.typ != q.typ || (peer.state != qpsRTR && peer.state != qpsRTS) || peer.destQPN != q.qpn {
		if !rc {
			return result{byteCnt: uint32(length)} // UC: the packets are lost, the sender never knows
		}
		return result{synd: uapi.MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR}
	}
	npkt := packets(length, q.mtu)
	if q.sqPSN != peer.rqPSN {
		if !rc {
			return result{byteCnt: uint32(length)}
		}
		return result{synd: uapi.MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR} // PSN sequence errors until retries run out
	}
	var r result
	switch opcode {
	case uapi.MLX5_OPCODE_SEND, uapi.MLX5_OPCODE_SEND_IMM, uapi.MLX5_OPCODE_SEND_INVAL:
		r = d.deliver(q, peer, opcode, src, length, imm, solicited)
	case uapi.MLX5_OPCODE_RDMA_WRITE, uapi.MLX5_OPCODE_RDMA_WRITE_IMM:
		dst, ok := d.remote(peer, raddr, length, uapi.IB_UVERBS_ACCESS_REMOTE_WRITE)
		if !ok {
			r = result{synd: uapi.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, respErr: true, asyncType: 3}
			break
		}
		if opcode == uapi.MLX5_OPCODE_RDMA_WRITE_IMM {
			if !peer.recvPosted() {
				if !rc {
					return result{byteCnt: uint32(length)}
				}
				return result{rnr: true}
			}
			move(dst, src)
			var e [cqeSize]byte
			_, ctr := peer.nextRecv()
			d.respCQE(peer, q, &e, uapi.MLX5_CQE_RESP_WR_IMM, uint32(length), imm, ctr)
			d.takeRecv(peer)
			d.complete(peer.rcq, &e, solicited, false)
		} else {
			move(dst, src)
		}
		r = result{byteCnt: uint32(length)}
	case uapi.MLX5_OPCODE_RDMA_READ:
		from, ok := d.remote(peer, raddr, length, uapi.IB_UVERBS_ACCESS_REMOTE_READ)
		if !ok {
			r = result{synd: uapi.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, respErr: true, asyncType: 3}
			break
		}
		move(src, from)
		r = result{byteCnt: uint32(length)}
	default: // atomics
		if be.Uint64(raddr[raddrAddr:])%8 != 0 {
			r = result{synd: uapi.MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, respErr: true, asyncType: 2}
			break
		}
		t, ok := d.remote(peer, raddr, 8, uapi.IB_UVERBS_ACCESS_REMOTE_ATOMIC)
		if !ok {
			r = result{synd: uapi.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, respErr: true, asyncType: 3}
			break
		}
		// The target is a big-endian 64-bit integer, as the device sees
		// memory; the original value goes back big-endian too.
		target := bytesAt(t[0].p, 8)
		old := be.Uint64(target)
		arg := be.Uint64(atomic[atomicSwapAdd:])
		if opcode == uapi.MLX5_OPCODE_ATOMIC_CS {
			if old == be.Uint64(atomic[atomicCompare:]) {
				be.PutUint64(target, arg)
			}
		} else {
			be.PutUint64(target, old+arg)
		}
		var b [8]byte
		be.PutUint64(b[:], old)
		move(src, []span{{unsafe.Pointer(&b[0]), 8}})
		r = result{byteCnt: 8}
	}
	if r.rnr {
		return r
	}
	if r.respErr {
		d.responderError(peer, r.asyncType)
	}
	if r.synd == 0 || r.respErr {
		q.sqPSN, peer.rqPSN = psnAdd(q.sqPSN, npkt), psnAdd(peer.rqPSN, npkt)
	}
	return r
}

// remote resolves an RDMA target: the rkey's region in the peer's
// protection domain with the right, the peer QP's access flags allowing
// it too.
func (d *Device) remote(peer *qp, raddr []byte, n uint64, right uint32) ([]span, bool) {
	addr, rkey := be.Uint64(raddr[raddrAddr:]), be.Uint32(raddr[raddrRKey:])
	if peer.access&right == 0 {
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	p, ok := d.mem(peer.pd, peer, rkey, addr, n, func(a uint32) bool { return a&right != 0 })
	if !ok {
		return nil, false
	}
	return []span{{p, int(n)}}, true
}

// responderError moves a responder to the error state after the NAK it
// sent, with the async event the kernel reports (QP_REQ_ERR 2,
// QP_ACCESS_ERR 3).
func (d *Device) responderError(peer *qp, typ uint32) {
	if typ != 0 && peer.ctx.asyncEvent(peer.user, typ, eventKey{1, peer.user}) {
		peer.asyncs++
	}
	d.qpError(peer)
}

// deliver hands a SEND to the peer's receive queue.
func (d *Device) deliver(q, peer *qp, opcode uint8, src []span, length uint64, imm [4]byte, solicited bool) result {
	defer d.on(peer)()
	rc := q.typ == uapi.IB_UVERBS_QPT_RC
	if peer.rqCnt == 0 && peer.srq == nil {
		return result{synd: uapi.MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR}
	}
	if !peer.recvPosted() {
		if !rc {
			return result{byteCnt: uint32(length)} // UC: dropped
		}
		return result{rnr: true}
	}
	segs, ctr := peer.nextRecv()
	dst, capacity, synd := d.local(peer, segs, true)
	if synd != 0 {
		d.respError(peer, synd, vendorDefault)
		return result{synd: uapi.MLX5_CQE_SYNDROME_REMOTE_OP_ERR, respErr: true, asyncType: 2}
	}
	if capacity < length {
		d.respError(peer, uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, vendorDefault)
		return result{synd: uapi.MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR, respErr: true, asyncType: 2}
	}
	if opcode == uapi.MLX5_OPCODE_SEND_INVAL && !d.remoteInvalidate(peer, be.Uint32(imm[:])) {
		// No window of the responder's to invalidate: a protection
		// error there, an access error NAKed to the requester.
		d.respError(peer, uapi.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR, vendorDefault)
		return result{synd: uapi.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, respErr: true, asyncType: 3}
	}
	move(dst, src)
	op := uint8(uapi.MLX5_CQE_RESP_SEND)
	switch opcode {
	case uapi.MLX5_OPCODE_SEND_IMM:
		op = uapi.MLX5_CQE_RESP_SEND_IMM
	case uapi.MLX5_OPCODE_SEND_INVAL:
		op = uapi.MLX5_CQE_RESP_SEND_INV
	default:
		imm = [4]byte{}
	}
	var e [cqeSize]byte
	d.respCQE(peer, q, &e, op, uint32(length), imm, ctr)
	d.takeRecv(peer)
	d.complete(peer.rcq, &e, solicited, false)
	return result{byteCnt: uint32(length)}
}

// respCQE fills a responder CQE of peer for a message from q, which
// used the receive WQE ctr names.
func (d *Device) respCQE(peer, from *qp, e *[cqeSize]byte, op uint8, byteCnt uint32, imm [4]byte, ctr uint16) {
	be.PutUint32(e[cqeSRQNUIdx:], peer.uidxField())
	copy(e[cqeImmInvalPKey:], imm[:]) // as on the wire: big-endian
	be.PutUint32(e[cqeByteCnt:], byteCnt)
	be.PutUint32(e[cqeFlagsRQPN:], from.qpn)
	be.PutUint32(e[cqeSopDropQPN:], peer.qpn)
	be.PutUint16(e[cqeWQECounter:], ctr)
	e[cqeOpOwn] = op << 4
}

// execUD sends a datagram: routed by the address vector's remote QPN on
// this device's wire, checked against the receiver's Q_Key; it arrives
// with a 40-byte GRH, or is dropped, and the sender never knows.
func (d *Device) execUD(q *qp, opcode uint8, w []byte, imm [4]byte, solicited bool) result {
	if opcode != uapi.MLX5_OPCODE_SEND && opcode != uapi.MLX5_OPCODE_SEND_IMM {
		return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR}
	}
	if len(w) < ctrlSize+avSize {
		d.violate("UD QP %#x: a send WQE without a datagram segment", q.qpn)
		return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR}
	}
	av := w[ctrlSize : ctrlSize+avSize]
	src, length, synd := d.local(q, w[ctrlSize+avSize:], false)
	if synd != 0 {
		return result{synd: synd}
	}
	if length > uint64(256)<<(mtu1024-1) {
		return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR} // a datagram is one packet
	}
	ok := result{byteCnt: uint32(length)}
	dqp := be.Uint32(av[avDQPDCT:])
	if dqp&uapi.MLX5_EXTENDED_UD_AV == 0 {
		d.violate("UD QP %#x: address vector without MLX5_EXTENDED_UD_AV (dqp_dct %#x)", q.qpn, dqp)
	}
	gidFl := be.Uint32(av[avGrhGIDFl:])
	var rgid [16]byte
	copy(rgid[:], av[avRGID:])
	var rmac [6]byte
	copy(rmac[:], av[avRMAC:])
	sgidIdx := int(gidFl >> 20 & 0xff)
	if gidFl&(1<<30) == 0 || sgidIdx >= len(gids) {
		d.violate("UD QP %#x: RoCE address vector without a GRH or with source GID %d (grh_gid_fl %#x)", q.qpn, sgidIdx, gidFl)
		return ok
	}
	if mac, found := resolveMAC(rgid); !found || mac != rmac {
		d.violate("UD QP %#x: address vector MAC %x for GID %x, the kernel resolved %x", q.qpn, rmac, rgid, mac)
		return ok
	}
	if gidIndex(rgid) < 0 {
		return ok // another host: not on this wire
	}
	qkey := be.Uint32(av[avQKey:])
	if qkey&0x80000000 != 0 {
		qkey = q.qkey // a Q_Key with the high bit set means the QP's own
	}
	peer := d.qps[dqp&0xffffff]
	if peer == nil || peer.dead {
		return ok
	}
	defer d.on(peer)()
	if peer.typ != uapi.IB_UVERBS_QPT_UD || (peer.state != qpsRTR && peer.state != qpsRTS) ||
		peer.qkey != qkey || !peer.recvPosted() {
		return ok
	}
	segs, ctr := peer.nextRecv()
	dst, capacity, synd := d.local(peer, segs, true)
	if synd != 0 {
		d.respError(peer, synd, vendorDefault)
		return ok
	}
	const grhSize = 40
	if capacity < length+grhSize {
		d.respError(peer, uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, vendorDefault)
		return ok
	}
	var grh [grhSize]byte
	l3 := buildGRH(&grh, gids[sgidIdx], rgid, av[avHopLimit], uint32(length), opcode == uapi.MLX5_OPCODE_SEND_IMM)
	move(dst, append([]span{{unsafe.Pointer(&grh[0]), grhSize}}, src...))
	op := uint8(uapi.MLX5_CQE_RESP_SEND)
	if opcode == uapi.MLX5_OPCODE_SEND_IMM {
		op = uapi.MLX5_CQE_RESP_SEND_IMM
	} else {
		imm = [4]byte{} // pkey index 0
	}
	var e [cqeSize]byte
	d.respCQE(peer, q, &e, op, uint32(length)+grhSize, imm, ctr)
	be.PutUint32(e[cqeFlagsRQPN:], uint32(l3)<<28|q.qpn)
	e[cqeMLPath] = 0
	d.takeRecv(peer)
	d.complete(peer.rcq, &e, solicited, false)
	return ok
}

// buildGRH writes what a RoCE v2 receive finds in its first 40 bytes: the
// IPv4 header in the last 20 (IPv4-mapped GIDs), or the IPv6 header. It
// returns the CQE's L3 header type.
func buildGRH(g *[40]byte, sgid, dgid [16]byte, hop uint8, payload uint32, withImm bool) uint8 {
	const udp, bth, deth, icrc = 8, 12, 8, 4
	l4 := udp + bth + deth + payload + icrc
	if withImm {
		l4 += 4
	}
	v4 := func(a [16]byte) bool {
		return [12]byte(a[:12]) == [12]byte{10: 0xff, 11: 0xff}
	}
	if v4(sgid) && v4(dgid) {
		h := g[20:]
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[2:], uint16(20+l4))
		h[6] = 0x40 // don't fragment
		h[8] = hop
		h[9] = 17 // UDP
		copy(h[12:16], sgid[12:])
		copy(h[16:20], dgid[12:])
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(h[i:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		binary.BigEndian.PutUint16(h[10:], ^uint16(sum))
		return uapi.MLX5_CQE_L3_HDR_TYPE_IPV4
	}
	g[0] = 0x60
	binary.BigEndian.PutUint16(g[4:], uint16(l4))
	g[6] = 17
	g[7] = hop
	copy(g[8:24], sgid[:])
	copy(g[24:40], dgid[:])
	return uapi.MLX5_CQE_L3_HDR_TYPE_IPV6
}
