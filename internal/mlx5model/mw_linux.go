package mlx5model

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// Memory windows: ALLOC_MW and DEALLOC_MW as mlx5_ib answers them, and
// the UMR WQEs that bind and invalidate them, as the device executes
// them. A window is an mkey of its own in the device's key space (an mr
// with win set): free until a bind gives it a range of an MR, its rights
// and, for type 2, the QP it is bound to; an access through its key is
// then checked against all of these, the range too (which rxe does not
// check). A UMR names the window by its key's index (the upper 24 bits);
// a bind takes the key's new low byte from the mkey context.

// window is the state an mkey of a memory window adds to an mr. The mr's
// iova, length, base and access are the bound range's.
type window struct {
	typ    uint8
	bound  bool
	qpn    uint32 // the QP a type-2 window is bound to
	target *mr    // the MR it opens
}

// UMR segment offsets, from the generated mirrors of mlx5dv.h.
const (
	umrFlags       = unsafe.Offsetof(uapi.Mlx5WqeUmrCtrlSeg{}.Flags)
	umrKLMOcto     = unsafe.Offsetof(uapi.Mlx5WqeUmrCtrlSeg{}.KlmOctowords)
	umrMkeyMask    = unsafe.Offsetof(uapi.Mlx5WqeUmrCtrlSeg{}.MkeyMask)
	umrCtrlSize    = int(unsafe.Sizeof(uapi.Mlx5WqeUmrCtrlSeg{}))
	mkeyFree       = unsafe.Offsetof(uapi.Mlx5WqeMkeyContextSeg{}.Free)
	mkeyAccess     = unsafe.Offsetof(uapi.Mlx5WqeMkeyContextSeg{}.AccessFlags)
	mkeyQPNMkey    = unsafe.Offsetof(uapi.Mlx5WqeMkeyContextSeg{}.QPNMkey)
	mkeyStartAddr  = unsafe.Offsetof(uapi.Mlx5WqeMkeyContextSeg{}.StartAddr)
	mkeyLen        = unsafe.Offsetof(uapi.Mlx5WqeMkeyContextSeg{}.Len)
	mkeyCtxSize    = int(unsafe.Sizeof(uapi.Mlx5WqeMkeyContextSeg{}))
	klmByteCount   = unsafe.Offsetof(uapi.Mlx5WqeUmrKlmSeg{}.ByteCount)
	klmMkey        = unsafe.Offsetof(uapi.Mlx5WqeUmrKlmSeg{}.Mkey)
	klmAddress     = unsafe.Offsetof(uapi.Mlx5WqeUmrKlmSeg{}.Address)
	umrInvBytes    = ctrlSize + umrCtrlSize + mkeyCtxSize // 128
	umrBindBytes   = umrInvBytes + 64                     // and one KLM entry in a 64-byte block: 192
	umrNeededFlags = uapi.MLX5_WQE_UMR_CTRL_FLAG_INLINE | uapi.MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET
)

// allocMW is ib_uverbs_alloc_mw with mlx5_ib_alloc_mw: an optional
// driver request whose comp_mask and reserved bytes must be zero.
func (c *Context) allocMW(r *uapi.IBUverbsAllocMW, uhw []byte) (*mr, unix.Errno) {
	if r.MWType != 1 && r.MWType != 2 {
		return nil, unix.EINVAL
	}
	p := c.pdByHandle(r.PDHandle)
	if p == nil {
		return nil, unix.EINVAL
	}
	if len(uhw) >= 8 {
		req := view[uapi.Mlx5IBAllocMW](uhw)
		if req.CompMask != 0 || req.Reserved1 != 0 || req.Reserved2 != 0 {
			return nil, unix.EOPNOTSUPP
		}
	}
	d := c.d
	k := d.nextKey<<8 | uint32(d.nextKey&0x7f)
	d.nextKey++
	m := &mr{pd: p, key: k, win: &window{typ: r.MWType}}
	m.handle = c.newHandle(m)
	d.mrs[k] = m
	p.refs++
	return m, 0
}

// deallocMW destroys a window, bound or not.
func (c *Context) deallocMW(h uint32) unix.Errno {
	m, ok := c.handles[h].(*mr)
	if !ok || m.win == nil {
		return unix.EINVAL
	}
	delete(c.handles, h)
	delete(c.d.mrs, m.key)
	m.pd.refs--
	return 0
}

// windowByIndex finds the window whose key has the index of key.
func (d *Device) windowByIndex(key uint32) *mr {
	if m := d.mrs[key]; m != nil && m.win != nil {
		return m
	}
	for k, m := range d.mrs {
		if k>>8 == key>>8 && m.win != nil {
			return m
		}
	}
	return nil
}

// usable reports whether a bound window still opens a live MR.
func (d *Device) usable(m *mr) bool {
	w := m.win
	return w.bound && w.target != nil && d.mrs[w.target.key] == w.target
}

// execUMR executes a UMR WQE w of QP q: a window's bind, a type-1
// window's unbind or a type-2 window's local invalidation, laid out as
// rdma-core's mlx5 provider writes them. What only a provider bug writes
// is a violation; what the verbs define as a failed bind is a
// completion with MW_BIND_ERR.
func (d *Device) execUMR(q *qp, w []byte, imm [4]byte) result {
	if q.typ != uapi.IB_UVERBS_QPT_RC && q.typ != uapi.IB_UVERBS_QPT_UC {
		d.violate("QP %#x: a UMR WQE on a QP of type %d", q.qpn, q.typ)
		return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR}
	}
	if len(w) < umrInvBytes {
		d.violate("QP %#x: a UMR WQE of %d bytes", q.qpn, len(w))
		return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR}
	}
	umr := w[ctrlSize : ctrlSize+umrCtrlSize]
	mk := w[ctrlSize+umrCtrlSize : umrInvBytes]
	flags, octo, mask := umr[umrFlags], be.Uint16(umr[umrKLMOcto:]), be.Uint64(umr[umrMkeyMask:])
	free := mk[mkeyFree]&uapi.MLX5_WQE_MKEY_CONTEXT_FREE != 0
	qpnMkey := be.Uint32(mk[mkeyQPNMkey:])
	if flags&umrNeededFlags != umrNeededFlags || mask&(uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE|uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY) == 0 {
		d.violate("QP %#x: a UMR WQE with flags %#x, mkey mask %#x", q.qpn, flags, mask)
	}
	cur := be.Uint32(imm[:])
	m := d.windowByIndex(cur)
	if m == nil || m.pd != q.pd {
		return result{synd: uapi.MLX5_CQE_SYNDROME_MW_BIND_ERR}
	}
	win := m.win
	typ2 := win.typ == 2
	if typ2 && mask&uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN == 0 {
		d.violate("QP %#x: a UMR WQE on type-2 window %#x without the QPN in its mask", q.qpn, cur)
	}
	if free {
		if octo != 0 || len(w) != umrInvBytes {
			d.violate("QP %#x: a UMR WQE that frees window %#x carries translations (%d octowords, %d bytes)", q.qpn, cur, octo, len(w))
		}
		if typ2 {
			if flags&uapi.MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN == 0 {
				d.violate("QP %#x: a local invalidation of type-2 window %#x without CHECK_QPN", q.qpn, cur)
			}
			if !win.bound || win.qpn != q.qpn {
				return result{synd: uapi.MLX5_CQE_SYNDROME_MW_BIND_ERR}
			}
		}
		win.bound = false
		return result{}
	}
	// A bind.
	if octo != 4 || len(w) != umrBindBytes {
		d.violate("QP %#x: a bind of window %#x with %d octowords of translations in %d bytes", q.qpn, cur, octo, len(w))
		return result{synd: uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR}
	}
	const rights = uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN | uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR |
		uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE | uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ |
		uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE | uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC
	if mask&rights != rights {
		d.violate("QP %#x: a bind of window %#x with mkey mask %#x", q.qpn, cur, mask)
	}
	wantQPN := uint32(0xffffff)
	if typ2 {
		wantQPN = q.qpn
		if flags&uapi.MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE == 0 {
			d.violate("QP %#x: a bind of type-2 window %#x without CHECK_FREE", q.qpn, cur)
		}
	}
	if qpnMkey>>8 != wantQPN {
		d.violate("QP %#x: a bind of type-%d window %#x names QP %#x", q.qpn, win.typ, cur, qpnMkey>>8)
	}
	klm := w[umrInvBytes:]
	length, lkey, addr := uint64(be.Uint32(klm[klmByteCount:])), be.Uint32(klm[klmMkey:]), be.Uint64(klm[klmAddress:])
	if be.Uint64(mk[mkeyStartAddr:]) != addr || be.Uint64(mk[mkeyLen:]) != length {
		d.violate("QP %#x: a bind of window %#x at [%#x, +%d) with a translation of [%#x, +%d)", q.qpn, cur,
			be.Uint64(mk[mkeyStartAddr:]), be.Uint64(mk[mkeyLen:]), addr, length)
	}
	acc := mk[mkeyAccess]
	var ib uint32
	for _, f := range [...]struct {
		dev uint8
		ib  uint32
	}{
		{uapi.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE, uapi.IB_UVERBS_ACCESS_LOCAL_WRITE},
		{uapi.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE, uapi.IB_UVERBS_ACCESS_REMOTE_WRITE},
		{uapi.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ, uapi.IB_UVERBS_ACCESS_REMOTE_READ},
		{uapi.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC, uapi.IB_UVERBS_ACCESS_REMOTE_ATOMIC},
	} {
		if acc&f.dev != 0 {
			ib |= f.ib
		}
	}
	t := d.mrs[lkey]
	switch {
	case typ2 && win.bound, // CHECK_FREE
		t == nil || t.win != nil || t.pd != m.pd,
		t.access&uapi.IB_UVERBS_ACCESS_MW_BIND == 0,
		ib&(uapi.IB_UVERBS_ACCESS_REMOTE_WRITE|uapi.IB_UVERBS_ACCESS_REMOTE_ATOMIC) != 0 && t.access&uapi.IB_UVERBS_ACCESS_LOCAL_WRITE == 0,
		length == 0 || addr < t.iova || addr+length > t.iova+t.length || addr+length < addr:
		return result{synd: uapi.MLX5_CQE_SYNDROME_MW_BIND_ERR}
	}
	next := cur&^0xff | qpnMkey&0xff
	delete(d.mrs, m.key)
	m.key = next
	d.mrs[next] = m
	m.iova, m.length, m.access = addr, length, ib
	m.base = unsafe.Add(t.base, uintptr(addr-t.iova))
	win.bound, win.qpn, win.target = true, wantQPN, t
	return result{}
}

// remoteInvalidate is a SEND_WITH_INV's invalidation at its responder
// peer: of a type-2 window of the peer's PD, bound to the peer.
func (d *Device) remoteInvalidate(peer *qp, rkey uint32) bool {
	m := d.mrs[rkey]
	if m == nil || m.win == nil || m.win.typ != 2 || m.pd != peer.pd || !m.win.bound || m.win.qpn != peer.qpn {
		return false
	}
	m.win.bound = false
	return true
}
