package mlx5model

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/uapi"
)

// The HCA's doorbell side: UAR pages scanned for 8-byte doorbells, send
// queues run to the WQE a doorbell names, receive queues flushed in the
// error state.

// scanUARs consumes every doorbell rung on the context's UAR pages: the
// send doorbells first, then the arm doorbells, so that an arm rung
// before a send (program order, which MMIO keeps) is in force before the
// send's WQEs run and complete.
func (c *Context) scanUARs() bool {
	busy := false
	for _, u := range c.uars {
		for _, m := range u.maps {
			base := unsafe.Pointer(unsafe.SliceData(m))
			for _, off := range uarSendSlots {
				if n := takeCopy(unsafe.Add(base, off)); n > 0 {
					c.blueFlameCopy(u, off, n)
					busy = true
				}
				if db, ok := takeDoorbell(unsafe.Add(base, off)); ok {
					c.sendDoorbell(u, db)
					busy = true
				}
			}
		}
	}
	for _, u := range c.uars {
		if c.scanArms(u) {
			busy = true
		}
	}
	return busy
}

// scanArms consumes the arm doorbell of UAR page u.
func (c *Context) scanArms(u *uar) bool {
	busy := false
	for _, m := range u.maps {
		if db, ok := takeDoorbell(unsafe.Add(unsafe.Pointer(unsafe.SliceData(m)), uarCQDoorbel)); ok {
			c.armDoorbell(u, db)
			busy = true
		}
	}
	return busy
}

// takeCopy clears the bytes of a blue-flame register half past its
// 8-byte doorbell and returns how far they reach (0: none written).
func takeCopy(half unsafe.Pointer) uintptr {
	n := uintptr(0)
	for off := uintptr(8); off < bfHalf; off += 8 {
		w := (*uint64)(unsafe.Add(half, off))
		if atomic.LoadUint64(w) != 0 {
			atomic.StoreUint64(w, 0)
			n = off + 8
		}
	}
	return n
}

// blueFlameCopy records a blue-flame copy (a WQE written into the
// register beyond the doorbell's 8 bytes) on UAR page u. goverbs rings
// one half of a register from every QP of the page with 8-byte
// doorbells alone, which is safe only while no QP copies a WQE there: a
// copy into a half another QP rings at the same moment interleaves with
// its doorbell, and rdma-core allows one only on a register of its own,
// alternating halves, or under the register's lock (post_send_db in
// providers/mlx5/qp.c). The model takes no copies: its doorbell part
// still counts.
func (c *Context) blueFlameCopy(u *uar, off, n uintptr) {
	var qpns []string
	for _, o := range c.handles {
		if p, ok := o.(*qp); ok && p.uar == u && !p.dead {
			qpns = append(qpns, fmt.Sprintf("%#x", p.qpn))
		}
	}
	slices.Sort(qpns)
	c.d.violate("blue-flame copy of %d bytes into register half %#x of UAR page %d, which QPs [%s] ring: a shared half takes 8-byte doorbells only",
		n, off, u.pageID, strings.Join(qpns, " "))
}

// sqPending returns the send basic blocks posted and not yet consumed.
func (q *qp) sqPending() uint32 {
	return (load32BE(unsafe.Add(q.db, 4)) - q.sqCI) & 0xffff
}

// sendDoorbell handles an 8-byte send doorbell on UAR u: the first 8
// bytes of the ctrl segment of the last WQE posted. It must name a QP
// that rings this page, and a posted WQE whose ctrl segment it repeats.
// Every other QP ringing this page is swept to its doorbell record, in
// case a later doorbell overwrote its own.
func (c *Context) sendDoorbell(u *uar, db doorbell) {
	d := c.d
	d.stats.SendDoorbells++
	idx := uint16(db.hi() >> 8)
	qpn := db.lo() >> 8
	q := d.qps[qpn]
	switch {
	case q == nil || q.ctx != c:
		d.violate("send doorbell %s on UAR page %d names no QP of the context", hexBytes(db[:]), u.pageID)
	case q.uar != u:
		d.violate("QP %#x rang a send doorbell on UAR page %d, but it was given page %d", qpn, u.pageID, q.uar.pageID)
	case q.sqCnt == 0:
		d.violate("QP %#x rang a send doorbell, but it has no send queue", qpn)
	case q.dead:
	default:
		defer d.on(q)()
		pend := q.sqPending()
		if uint32(idx-uint16(q.sqCI)) >= pend {
			break // a WQE run already (its doorbell came late), or a bogus index: the record says nothing is there
		}
		ctrl := bytesAt(unsafe.Add(q.sq, uintptr(uint32(idx)&(q.sqCnt-1))*wqeBB), 8)
		if !bytes.Equal(ctrl, db[:]) {
			d.violate("QP %#x: send doorbell %s does not repeat the ctrl segment of WQE %d (%s)",
				qpn, hexBytes(db[:]), idx, hexBytes(ctrl))
			break
		}
		if !q.bellValid || uint32(idx-uint16(q.sqCI)) > uint32(q.bellIdx-uint16(q.sqCI)) {
			q.bellIdx, q.bellValid = idx, true
		}
	}
	for _, o := range c.handles {
		if p, ok := o.(*qp); ok && p.uar == u && p != q && p.sqCnt > 0 && !p.dead {
			restore := d.on(p)
			if p.sqPending() != 0 {
				p.sweep = true
			}
			restore()
		}
	}
}

// needsWork says whether the QP may have something for the HCA to do.
func (q *qp) needsWork() bool {
	return q.db != nil && !q.dead && (q.state == qpsRTS || q.state == qpsErr || q.state == qpsSQD)
}

// work runs a QP's send queue as far as its doorbells allow, and in the
// error state flushes its receive queue.
func (d *Device) work(q *qp) bool {
	defer d.on(q)()
	busy := false
	if q.state == qpsErr && d.flushRecvs(q) {
		busy = true
	}
	if q.sqCnt == 0 {
		return busy
	}
	pend := q.sqPending()
	if pend == 0 {
		q.bellValid, q.sweep, q.dbSince = false, false, time.Time{}
		return busy
	}
	if !q.bellValid && !q.sweep {
		// Posted, with no doorbell yet: the provider rings after the
		// record; a doorbell that never comes is its bug.
		now := time.Now()
		if q.dbSince.IsZero() {
			q.dbSince = now
			return busy
		}
		if now.Sub(q.dbSince) < 500*time.Millisecond {
			return busy
		}
		d.violate("QP %#x: send doorbell record at %d (%d basic blocks posted) for %v with no doorbell rung for them",
			q.qpn, (q.sqCI+pend)&0xffff, pend, now.Sub(q.dbSince).Round(time.Millisecond))
		q.sweep = true
	}
	q.dbSince = time.Time{}
	if q.state == qpsSQD {
		return busy
	}
	for pend != 0 && (q.bellValid || q.sweep) {
		start := uint16(q.sqCI)
		n, ok := d.execWQE(q, pend)
		if !ok {
			return busy // waiting (RNR)
		}
		busy = true
		if q.bellValid && start == q.bellIdx {
			q.bellValid = false
		}
		q.sqCI += n
		pend = q.sqPending()
	}
	if pend == 0 {
		if q.bellValid {
			d.violate("QP %#x: a send doorbell named WQE %d, where no WQE starts", q.qpn, q.bellIdx)
		}
		q.bellValid, q.sweep = false, false
	}
	return busy
}

// qpError moves a QP to the error state: what it holds is flushed, each
// WQE with a WR_FLUSH_ERR CQE.
func (d *Device) qpError(q *qp) {
	if q.state == qpsErr {
		return
	}
	q.state = qpsErr
	q.rnrWait = false
	q.sweep = true
	d.flushRecvs(q)
	// A QP on an SRQ has no receives of its own to flush: the device
	// reports instead that it will take no more WQEs from the SRQ
	// (MLX5_EVENT_TYPE_SRQ_LAST_WQE, which mlx5_ib reports as
	// IB_EVENT_QP_LAST_WQE_REACHED).
	if q.srq != nil && q.ctx.asyncEvent(q.user, eventQPLastWQEReached, eventKey{1, q.user}) {
		q.asyncs++
	}
	d.kick()
}

// flushRecvs completes every posted receive of a QP in error with a
// flush error.
func (d *Device) flushRecvs(q *qp) bool {
	if q.rqCnt == 0 || q.db == nil || q.dead {
		return false
	}
	defer d.on(q)()
	busy := false
	for uint16(load32BE(q.db)) != uint16(q.rqCI) {
		d.respError(q, uapi.MLX5_CQE_SYNDROME_WR_FLUSH_ERR, vendorFlush)
		busy = true
	}
	return busy
}

// respError completes the receive WQE the QP takes next (from its receive
// queue or its SRQ) in error, and consumes it.
func (d *Device) respError(q *qp, synd, vendor uint8) {
	_, ctr := q.nextRecv()
	var e [cqeSize]byte
	be.PutUint32(e[errCQESRQN:], q.uidxField())
	e[errCQEVendorSynd] = vendor
	e[errCQESyndrome] = synd
	be.PutUint32(e[errCQEOpcodeQPN:], q.qpn)
	be.PutUint16(e[cqeWQECounter:], ctr)
	e[cqeOpOwn] = uapi.MLX5_CQE_RESP_ERR << 4
	d.takeRecv(q)
	d.complete(q.rcq, &e, false, true)
}

// reqError completes the send WQE at idx in error.
func (d *Device) reqError(q *qp, idx uint16, opcode, synd, vendor uint8) {
	var e [cqeSize]byte
	be.PutUint32(e[errCQESRQN:], q.uidxField())
	e[errCQEVendorSynd] = vendor
	e[errCQESyndrome] = synd
	be.PutUint32(e[errCQEOpcodeQPN:], uint32(opcode)<<24|q.qpn)
	be.PutUint16(e[cqeWQECounter:], idx)
	e[cqeOpOwn] = uapi.MLX5_CQE_REQ_ERR << 4
	d.complete(q.scq, &e, false, true)
}

// uidxField is what CQEs carry in srqn_uidx: the user index (cqe_version
// 1), else the SRQ number (none: 0).
func (q *qp) uidxField() uint32 {
	if q.ctx.cqeVersion == 1 {
		return q.uidx & 0xffffff
	}
	if q.srq != nil {
		return q.srq.srqn
	}
	return 0
}
