package mlx5model

import (
	"encoding/binary"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// Arm states of a CQ.
const (
	armNone = iota
	armSolicited
	armNext
)

// armSentinel is what the model writes into the arm word of a new CQ's
// doorbell record: no provider writes it (bits 25-27 and 30-31 of an arm
// word are zero), so the first arm is a change even when its word is 0
// (sequence 0, next, consumer index 0) and another CQ's doorbell
// overwrote its own on the shared UAR page before the model looked. The
// device never writes there, and a provider never reads it back.
const armSentinel = 0xffffffff

// cq is a completion queue: the provider's ring and doorbell record, the
// HCA's producer index and arm state.
type cq struct {
	ctx    *Context
	handle uint32
	cqn    uint32
	user   uint64 // the user handle events carry
	ch     *eventPipe
	vector uint32
	buf    unsafe.Pointer // entry 0
	ncqe   uint32         // a power of two
	csize  uint32         // 64 or 128
	db     unsafe.Pointer // doorbell record: be32 consumer index, be32 arm word
	uar    *uar           // where its arm doorbells go
	refs   int            // QPs using it

	dead     bool   // its memory was unmapped (see Device.fault)
	pi       uint32 // producer index, free-running
	arm      uint8
	seq      uint32 // events fired: the arm sequence number the device expects
	lastArm  uint32 // the arm word last taken
	armSince time.Time
	broken   bool
	realTime bool // CQEs carry real-time timestamps (seconds:nanoseconds), not clock ticks
	ciAhead  bool // reported once
	fired    uint32
	asyncs   uint32
}

type cqReq struct {
	cqe     uint32
	user    uint64
	channel int // fd, or -1
	vector  uint32
	flags   uint32
}

func cqCreateIoctl(a *args) unix.Errno {
	r := cqReq{
		cqe:     uint32(a.val(uapi.UVERBS_ATTR_CREATE_CQ_CQE)),
		user:    a.val(uapi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE),
		channel: -1,
		vector:  uint32(a.val(uapi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR)),
		flags:   uint32(a.val(uapi.UVERBS_ATTR_CREATE_CQ_FLAGS)),
	}
	if a.has(uapi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL) {
		r.channel = int(int64(a.val(uapi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL)))
	}
	if a.has(uapi.UVERBS_ATTR_CREATE_CQ_EVENT_FD) {
		return unix.EOPNOTSUPP // the model reports CQ events to the default async fd only
	}
	const knownFlags = uapi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION | uapi.IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN
	if r.flags&^knownFlags != 0 {
		return unix.EINVAL
	}
	if r.flags&uapi.IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN != 0 {
		return unix.EOPNOTSUPP // mlx5 answers it with EOPNOTSUPP where the device cannot honour it; the model never does
	}
	// TIMESTAMP_COMPLETION changes nothing the device does: it writes a
	// timestamp into every CQE (write), asked for or not.
	in, ok := a.in(uapi.UVERBS_ATTR_UHW_IN)
	if !ok {
		return unix.EFAULT
	}
	q, out, e := a.c.createCQ(r, in, max(a.outLen(uapi.UVERBS_ATTR_UHW_OUT), 0))
	if e != 0 {
		return e
	}
	a.setNew(uapi.UVERBS_ATTR_CREATE_CQ_HANDLE, uint64(q.handle))
	a.out(uapi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, u32b(q.ncqe-1))
	a.out(uapi.UVERBS_ATTR_UHW_OUT, out)
	return 0
}

func roundPow2(n uint64) uint64 {
	p := uint64(1)
	for p < n {
		p <<= 1
	}
	return p
}

// createCQ is the core's create_cq and mlx5_ib_create_cq for a user CQ.
func (c *Context) createCQ(r cqReq, uhw []byte, uhwOutLen int) (*cq, []byte, unix.Errno) {
	d := c.d
	if int32(r.cqe) < 0 || r.cqe > 1<<logMaxCQ {
		return nil, nil, unix.EINVAL
	}
	n := roundPow2(uint64(r.cqe) + 1)
	if n > 1<<logMaxCQ {
		return nil, nil, unix.EINVAL
	}
	if r.vector >= uint32(d.opts.CompVectors) {
		return nil, nil, unix.EINVAL
	}
	var ch *eventPipe
	if r.channel >= 0 {
		ch = c.channels[r.channel]
		if ch == nil || !ch.alive() {
			return nil, nil, unix.EINVAL
		}
	}
	const minIn = int(unsafe.Offsetof(uapi.Mlx5IBCreateCQ{}.Flags))
	if len(uhw) < minIn {
		return nil, nil, unix.EINVAL
	}
	req := view[uapi.Mlx5IBCreateCQ](uhw)
	if req.Reserved0 != 0 || req.Reserved1 != 0 {
		return nil, nil, unix.EINVAL
	}
	const knownFlags = uapi.MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD | uapi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX |
		uapi.MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS
	if req.Flags&^knownFlags != 0 {
		return nil, nil, unix.EINVAL
	}
	if req.CQESize != 64 && req.CQESize != 128 {
		return nil, nil, unix.EINVAL
	}
	if req.Flags&uapi.MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD != 0 && req.CQESize != 128 {
		return nil, nil, unix.EINVAL
	}
	realTime := req.Flags&uapi.MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS != 0
	if realTime && !d.opts.RealTimeClock {
		// mlx5_ib takes the flag and fails the QPs that use the CQ
		// (EOPNOTSUPP); the model refuses it here: GET_CONTEXT did not
		// report REAL_TIME_TS, so no provider may ask.
		d.violate("create cq: the provider asked for real-time CQE timestamps (MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS) of a device whose clock is free-running")
		return nil, nil, unix.EOPNOTSUPP
	}
	if req.CQECompEn != 0 {
		d.violate("create cq: the provider asked for compressed CQEs (cqe_comp_en %d, format %d): goverbs must never", req.CQECompEn, req.CQECompResFormat)
		return nil, nil, unix.EOPNOTSUPP
	}
	var u *uar
	switch {
	case req.Flags&uapi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX != 0:
		u = c.uarByPageID(uint32(req.UARPageIndex))
		if u == nil {
			return nil, nil, unix.EINVAL
		}
		if !u.static && u.typ != uapi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC {
			d.violate("create cq: UAR page %d for arm doorbells is a blue-flame UAR, not the non-cached one", u.pageID)
		}
	case c.dynUAR:
		return nil, nil, unix.EINVAL // dynamic UARs: the CQ must name its page
	default:
		if len(c.static) == 0 {
			return nil, nil, unix.EINVAL
		}
		u = c.static[0]
	}
	buf, db := ptrOf(&req.BufAddr), ptrOf(&req.DbAddr)
	if buf == nil || uintptr(buf)%uarPageSize != 0 || db == nil || uintptr(db)%8 != 0 {
		return nil, nil, unix.EINVAL
	}
	if !mapped(buf, n*uint64(req.CQESize)) || !mapped(db, 8) {
		return nil, nil, unix.EFAULT
	}
	q := &cq{ctx: c, user: r.user, ch: ch, vector: r.vector, buf: buf, ncqe: uint32(n), csize: req.CQESize,
		db: db, uar: u, lastArm: armSentinel, realTime: realTime}
	q.checkFresh(0, "create cq")
	if ci, aw := load32BE(db), load32BE(unsafe.Add(db, 4)); ci != 0 || aw != 0 {
		d.violate("create cq: doorbell record not zeroed (consumer index %#x, arm word %#x)", ci, aw)
	}
	store32BE(unsafe.Add(db, 4), armSentinel)
	q.cqn = d.nextCQN
	d.nextCQN++
	d.cqs[q.cqn] = q
	q.handle = c.newHandle(q)
	resp := uapi.Mlx5IBCreateCQResp{Cqn: q.cqn}
	var out []byte
	if uhwOutLen > 0 {
		out = structBytes(&resp)
	}
	return q, out, 0
}

// entry returns the 64-byte CQE part of entry i (the second half of a
// 128-byte entry).
func (q *cq) entry(i uint32) unsafe.Pointer {
	return unsafe.Add(q.buf, uintptr(i&(q.ncqe-1))*uintptr(q.csize)+uintptr(q.csize)-uintptr(cqeSize))
}

// checkFresh checks that no entry the device will write from counter pi
// on looks valid to the consumer before the device writes it: its
// opcode invalid or its owner bit that of an earlier pass.
func (q *cq) checkFresh(pi uint32, op string) {
	for k := pi; k < pi+q.ncqe; k++ {
		oo := *(*byte)(unsafe.Add(q.entry(k), cqeOpOwn))
		owner := uint32(oo & 1)
		if oo>>4 != uapi.MLX5_CQE_INVALID && owner == (k/q.ncqe)&1 {
			q.ctx.d.violate("%s: CQ entry %d (op_own %#02x) looks valid before the device wrote it", op, k&(q.ncqe-1), oo)
			return
		}
	}
}

func cqDestroyIoctl(a *args) unix.Errno {
	r, e := a.c.destroyCQHandle(uint32(a.val(uapi.UVERBS_ATTR_DESTROY_CQ_HANDLE)))
	if e != 0 {
		return e
	}
	a.out(uapi.UVERBS_ATTR_DESTROY_CQ_RESP, structBytes(&r))
	return 0
}

func (c *Context) destroyCQHandle(h uint32) (uapi.IBUverbsDestroyCQResp, unix.Errno) {
	q, ok := c.handles[h].(*cq)
	if !ok {
		return uapi.IBUverbsDestroyCQResp{}, unix.EINVAL
	}
	if q.refs > 0 {
		return uapi.IBUverbsDestroyCQResp{}, unix.EBUSY
	}
	return c.destroyCQ(q), 0
}

// destroyCQ forgets a CQ and counts the events the application read:
// those still queued are dropped by the kernel (here: left, and not
// counted; the library drops events of CQs it no longer has).
func (c *Context) destroyCQ(q *cq) uapi.IBUverbsDestroyCQResp {
	var r uapi.IBUverbsDestroyCQResp
	k := eventKey{0, q.user}
	r.CompEventsReported = q.fired
	if q.ch != nil {
		r.CompEventsReported -= uint32(q.ch.unread(k))
	}
	r.AsyncEventsReported = q.asyncs
	if c.async != nil {
		r.AsyncEventsReported -= uint32(c.async.unread(k))
	}
	delete(c.handles, q.handle)
	delete(c.d.cqs, q.cqn)
	if q.ch != nil && !q.ch.alive() {
		still := false
		for _, o := range c.handles {
			if x, ok := o.(*cq); ok && x.ch == q.ch {
				still = true
			}
		}
		if !still {
			q.ch.close()
			delete(c.channels, q.ch.r)
		}
	}
	q.buf, q.db = nil, nil
	return r
}

// resizeCQ is mlx5_ib_resize_cq for a user CQ: the device ends the old
// ring with a RESIZE_CQ CQE and goes on in the new one.
func (c *Context) resizeCQ(h, cqe uint32, uhw []byte) (uint32, unix.Errno) {
	q, ok := c.handles[h].(*cq)
	if !ok {
		return 0, unix.EINVAL
	}
	if cqe < 1 || cqe > 1<<logMaxCQ {
		return 0, unix.EINVAL
	}
	n := uint32(roundPow2(uint64(cqe) + 1))
	if n > 1<<logMaxCQ {
		return 0, unix.EINVAL
	}
	if n == q.ncqe {
		return q.ncqe - 1, 0 // the kernel does nothing
	}
	if len(uhw) < int(unsafe.Sizeof(uapi.Mlx5IBResizeCQ{})) {
		return 0, unix.EINVAL
	}
	req := view[uapi.Mlx5IBResizeCQ](uhw)
	if req.Reserved0 != 0 || req.Reserved1 != 0 {
		return 0, unix.EINVAL
	}
	size := uint32(req.CQESize)
	if size != 64 && size != 128 {
		return 0, unix.EINVAL
	}
	buf := ptrOf(&req.BufAddr)
	if buf == nil || uintptr(buf)%uarPageSize != 0 {
		return 0, unix.EINVAL
	}
	if !mapped(buf, uint64(n)*uint64(size)) {
		return 0, unix.EFAULT
	}
	ci := load32BE(q.db) & 0xffffff
	held := (q.pi - ci) & 0xffffff
	if held >= q.ncqe || held >= n {
		// The model refuses what the device could not do: the old ring
		// has no room for the resize CQE, or the new one none for what
		// the old holds.
		return 0, unix.EINVAL
	}
	var e [cqeSize]byte
	e[cqeOpOwn] = uapi.MLX5_CQE_RESIZE_CQ << 4
	c.d.write(q, &e)
	q.buf, q.ncqe, q.csize = buf, n, size
	q.checkFresh(q.pi, "resize cq")
	return n - 1, 0
}

// write stores a CQE at the producer index: every byte but the last word
// plainly, then the last word (op_own with the owner bit of the pass)
// with a release store. The caller checked there is room.
func (d *Device) write(q *cq, e *[cqeSize]byte) {
	p := q.entry(q.pi)
	if q.csize == 128 {
		clear(bytesAt(unsafe.Add(p, -64), 64))
	}
	e[cqeOpOwn] = e[cqeOpOwn]&^1 | uint8(q.pi/q.ncqe&1)
	copy(bytesAt(p, int(cqeLastWord)), e[:cqeLastWord])
	atomic.StoreUint32((*uint32)(unsafe.Add(p, cqeLastWord)), binary.NativeEndian.Uint32(e[cqeLastWord:]))
	q.pi++
	d.stats.CQEs++
}

// complete writes a completion to q and raises the event an arm asks
// for. solicited marks it (op_own bit 1); errors fire solicited arms too.
// On overrun the CQ breaks and CQ_ERR goes to the async fd.
func (d *Device) complete(q *cq, e *[cqeSize]byte, solicited, isErr bool) {
	if q == nil || q.broken || q.dead || q.db == nil {
		return
	}
	defer d.on(q)()
	ci := load32BE(q.db) & 0xffffff
	if ahead := (ci - q.pi) & 0xffffff; ahead != 0 && ahead < 1<<23 {
		if !q.ciAhead {
			q.ciAhead = true
			d.violate("CQ %#x: consumer index %#x is ahead of the device's producer index %#x", q.cqn, ci, q.pi&0xffffff)
		}
		ci = q.pi & 0xffffff
	}
	if (q.pi-ci)&0xffffff >= q.ncqe {
		q.broken = true
		d.stats.Overruns++
		if q.ctx.asyncEvent(q.user, 0 /* IBV_EVENT_CQ_ERR */, eventKey{0, q.user}) {
			q.asyncs++
		}
		return
	}
	if solicited {
		e[cqeOpOwn] |= 2
	}
	if !isErr { // an error CQE's syndromes lie where the timestamp would
		binary.BigEndian.PutUint64(e[cqeTimestamp:], d.timestamp(q))
	}
	d.write(q, e)
	if isErr {
		d.stats.ErrorCQEs++
	}
	// An arm rung before this CQE was written is in force for it, though
	// the scan has not taken it yet: take it now (one rung just after
	// fires early, which only gives an event for a CQE already polled).
	q.ctx.scanArms(q.uar)
	if q.arm == armNext || (q.arm == armSolicited && (solicited || isErr)) {
		d.fire(q)
	}
}

// timestamp is the device's clock as a CQE of q carries it: ticks of
// the free-running clock (HcaCoreClock, 1 GHz: nanoseconds since the
// device was made, masked as TimestampMask says), or, for a CQ created
// with real-time timestamps, the time of day as seconds (upper 32 bits)
// and nanoseconds (lower 32). Both never go back from one CQE to the
// next: the free-running one reads Go's monotonic clock; the real-time
// one follows the host's wall clock, which ntp may step, as a PTP
// clock would be stepped.
func (d *Device) timestamp(q *cq) uint64 {
	if q.realTime {
		now := time.Now()
		return uint64(now.Unix())<<32 | uint64(now.Nanosecond())
	}
	return uint64(time.Since(d.born)) & timestampMask
}

// fire raises the one event an arm allows.
func (d *Device) fire(q *cq) {
	q.arm = armNone
	q.seq++
	d.stats.Events++
	if q.ch != nil {
		ev := uapi.IBUverbsCompEventDesc{CQHandle: q.user}
		if q.ch.post(structBytes(&ev), eventKey{0, q.user}) {
			q.fired++
		}
	}
}

// arm takes an arm word: stale (its sequence number is not the count of
// events fired, mod 4) it is ignored; next overrides solicited.
func (d *Device) arm(q *cq, sn uint32, solicited bool, ci uint32) {
	d.stats.Arms++
	if sn != q.seq&3 {
		d.stats.StaleArms++
		return
	}
	if solicited {
		if q.arm == armNone {
			q.arm = armSolicited
		}
	} else {
		q.arm = armNext
	}
	if d.opts.ArmFiresOnPending && ci != q.pi&0xffffff {
		d.fire(q)
	}
}

// takeArmWord arms q with a word read from its doorbell record or a UAR.
func (d *Device) takeArmWord(q *cq, w uint32) {
	q.lastArm = w
	q.armSince = time.Time{}
	d.arm(q, w>>28&3, w&uapi.MLX5_CQ_DB_REQ_NOT_SOL != 0, w&0xffffff)
}

// armDoorbell handles an 8-byte CQ doorbell found on UAR u: the CQ it
// names, and every CQ whose arm word changed in its doorbell record (a
// later doorbell on the page may have overwritten theirs).
func (c *Context) armDoorbell(u *uar, db doorbell) {
	d := c.d
	d.stats.ArmDoorbells++
	word, cqn := db.hi(), db.lo()&0xffffff
	q := d.cqs[cqn]
	switch {
	case q == nil || q.ctx != c:
		d.violate("arm doorbell %s on UAR page %d names no CQ of the context", hexBytes(db[:]), u.pageID)
	case q.uar != u:
		d.violate("CQ %#x armed on UAR page %d, but it was created with page %d", cqn, u.pageID, q.uar.pageID)
	case word&0x0e000000 != 0 || word&0xc0000000 != 0:
		d.violate("CQ %#x: arm doorbell word %#08x has reserved bits set", cqn, word)
	case q.dead:
	default:
		defer d.on(q)()
		rec := load32BE(unsafe.Add(q.db, 4))
		if rec == q.lastArm && word != rec {
			d.violate("CQ %#x: arm doorbell word %#08x, but its doorbell record holds %#08x", cqn, word, rec)
			d.takeArmWord(q, word)
		}
	}
	for _, o := range c.handles {
		if p, ok := o.(*cq); ok && p.uar == u && p.db != nil && !p.dead {
			restore := d.on(p)
			if w := load32BE(unsafe.Add(p.db, 4)); w != p.lastArm {
				d.takeArmWord(p, w)
			}
			restore()
		}
	}
}

// watchArms finds arm words written to doorbell records with no doorbell
// rung after them: a provider bug, reported once the wait is long.
func (c *Context) watchArms(now time.Time) {
	for _, o := range c.handles {
		p, ok := o.(*cq)
		if !ok || p.db == nil || p.dead {
			continue
		}
		restore := c.d.on(p)
		w := load32BE(unsafe.Add(p.db, 4))
		restore()
		if w == p.lastArm {
			continue
		}
		if p.armSince.IsZero() {
			p.armSince = now
			continue
		}
		if now.Sub(p.armSince) > 500*time.Millisecond {
			c.d.violate("CQ %#x: arm word %#08x in the doorbell record for %v with no doorbell rung on UAR page %d",
				p.cqn, w, now.Sub(p.armSince).Round(time.Millisecond), p.uar.pageID)
			c.d.takeArmWord(p, w)
		}
	}
}
