package mlx5

import (
	"encoding/binary"
	"fmt"
	"github.com/goverbs/goverbs/internal/cqseam"
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/release"
	"github.com/goverbs/goverbs/uapi"
)

// cqeBytes is the CQE size goverbs asks for. 64 is what rdma-core uses
// unless told otherwise; the poll path handles 128 too.
const cqeBytes = 64

// completionQueue is an mlx5 completion queue: a ring of CQEs in our memory that the
// device writes and Poll reads, a doorbell record that tells the device
// how far we have read, and a UAR doorbell that arms it. Polling and
// arming make no syscall.
//
// Its PollRing, which is cq.CQ.Poll, looks at the CQE at
// the consumer index with no lock, concurrently with everything, and
// takes the CQ's lock only to consume. For that, a ring's memory is never
// unmapped while a PollRing may read it: Destroy, Release and Resize
// retire it (retire), and the retired memory is given back only once
// nothing can reach it.
type completionQueue struct {
	ctx    *context
	handle uint32
	cqn    uint32

	// The fields below are the locked side's: Poll, ReqNotify, Resize,
	// the clean of a reset QP, Destroy and Release run under the cq
	// package's lock (or before the CQ is shared).
	buf     dmaBuf
	ring    unsafe.Pointer // CQE 0 (its 64-byte part)
	ncqe    uint32         // a power of two
	lgNCQE  uint32
	cqeSize uint32 // 64 or 128; 0 once released (every index names releasedCQE)

	db    unsafe.Pointer // doorbell record: be32 consumer index, be32 arm word
	ci    uint32         // consumer index, free-running
	armSN uint32         // arm sequence number: advanced per event read

	cur  *cqRing                // buf's cqRing, where setCI publishes ci; nil once released
	live atomic.Pointer[cqRing] // cur again, for PollRing's look; nil once released

	// ts is the clock of the completions' timestamps, set at creation:
	// unless it is NoTimestamps, pollLocked fills WC.Timestamp from each
	// CQE (stampRun).
	ts cqseam.Clock

	// look is Poll's QP lookup, kept from one Poll to the next while the
	// context's QP table is the same one (creating or destroying a QP
	// replaces the table): a poll of one CQE of the QP the last poll found
	// does no map lookup.
	look qpLookup
}

var _ provider.CQ = (*completionQueue)(nil)

// cqRing is what PollRing reads of a CQ's ring without the lock: where
// the CQEs are, how many, how big, and the consumer index. It is made
// with its buffer, and all but ci stay as they are; ci is the locked
// side's q.ci, stored after it (setCI). One atomic load of CQ.live gives
// a ring and the index into that same ring, even across a Resize, which
// publishes a new cqRing.
type cqRing struct {
	mem  dmaBuf         // the ring's mapping; once published, only retire gives it back
	cqe0 unsafe.Pointer // CQE 0 (its 64-byte part)
	mask uint32         // the CQEs (a power of two), less one
	lg   uint32         // log2 of the CQEs
	size uint32         // bytes a CQE: 64 or 128
	ci   atomic.Uint32  // the consumer index, free-running, as setCI last published it
}

// newRing allocates a ring of n CQEs (a power of two) of size bytes,
// every one invalid.
func newRing(n, size uint32) (*cqRing, error) {
	buf, err := allocDMA(int(n * size))
	if err != nil {
		return nil, err
	}
	initCQEs(buf, n, size)
	return &cqRing{mem: buf, cqe0: unsafe.Add(buf.ptr(), size-cqeSize64),
		mask: n - 1, lg: uint32(bits.TrailingZeros32(n)), size: size}, nil
}

// at returns the address of the 64-byte CQE at index i (masked).
func (r *cqRing) at(i uint32) unsafe.Pointer {
	return unsafe.Add(r.cqe0, uintptr(i&r.mask)*uintptr(r.size))
}

// ready reports whether the CQE at the published consumer index is the
// software's: the test Poll's owned makes, without owned's read fence,
// since nothing more of the CQE is read here. It can be wrong only about
// what moves while it looks. A CQE the device is writing may be missed:
// it came during the look. With a Poll consuming at the same time, the
// index read may be stale: its CQE consumed, which says true and costs
// only the lock; or already written over by the device's next pass,
// which says false, but then every CQE there was when the look began
// went to that Poll, and the one there now came during the look.
func (r *cqRing) ready() bool {
	ci := r.ci.Load()
	return mine(opOwnWord((*uint32)(unsafe.Add(r.at(ci), cqeWQECounter))), ci, r.lg)
}

// CreateCQ allocates the ring and doorbell record, then creates the CQ in
// the kernel, naming the UAR page that takes its arm doorbells.
//
// The device writes a timestamp into every CQE; a CQ asked for them says
// so to the kernel (IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION), and Poll
// reads them. Wall-clock timestamps come only from a device whose
// driver reports its clock in real-time mode
// (MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS): its CQs created with
// MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS carry seconds and nanoseconds,
// which Poll turns into nanoseconds. A free-running clock's ticks would
// need the clock info page to become wall time, which goverbs does not
// read, so such a device refuses WallClock.
func (c *context) CreateCQ(r provider.CQReq) (provider.CQ, error) {
	var drvFlags uint16
	switch r.Timestamps {
	case cqseam.NoTimestamps:
	case cqseam.DeviceClock:
		r.Flags |= uapi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION
	case cqseam.WallClock:
		if c.resp.CompMask&uapi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS == 0 {
			return nil, fmt.Errorf("wall-clock completion timestamps: the device's clock is not in real-time mode "+
				"(the driver does not report REAL_TIME_TS), and goverbs does not convert its ticks: %w", errs.ErrNotSupported)
		}
		r.Flags |= uapi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION
		drvFlags |= uapi.MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS
	default:
		return nil, fmt.Errorf("completion timestamps: %v: %w", r.Timestamps, unix.EINVAL)
	}
	if r.CQE == 0 {
		return nil, fmt.Errorf("a CQ of 0 entries: %w", unix.EINVAL)
	}
	if r.CQE >= 1<<24 {
		return nil, fmt.Errorf("a CQ of %d entries, mlx5 takes at most %d: %w", r.CQE, 1<<24-1, unix.EINVAL)
	}
	q := &completionQueue{ctx: c, cqeSize: cqeBytes, ts: r.Timestamps}
	if err := q.alloc(roundPow2(r.CQE + 1)); err != nil {
		return nil, err
	}
	db, err := c.dbs.get()
	if err != nil {
		q.buf.free()
		return nil, err
	}
	q.db = db
	req := uapi.Mlx5IBCreateCQ{
		BufAddr: uapi.NewPointer(q.buf.ptr()),
		DbAddr:  uapi.NewPointer(db),
		CQESize: q.cqeSize,
		Flags:   drvFlags,
	}
	if c.dynamic {
		req.Flags |= uapi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX
		req.UARPageIndex = uint16(c.cqUAR.pageID)
	}
	var resp uapi.Mlx5IBCreateCQResp
	kr := r.CQReq
	kr.CQE = q.ncqe - 1 // the kernel adds one and rounds up again
	k, err := kverbs.CreateCQ(c.conn, kr, bytesOf(&req), bytesOf(&resp))
	if err != nil {
		q.buf.free()
		c.dbs.put(db)
		return nil, err
	}
	q.handle, q.cqn = k.Handle, resp.Cqn
	return q, nil
}

// alloc sets up a ring of n CQEs (a power of two), every one invalid.
func (q *completionQueue) alloc(n uint32) error {
	r, err := newRing(n, q.cqeSize)
	if err != nil {
		return err
	}
	q.use(r)
	return nil
}

// use makes r the CQ's ring, for Poll and for PollRing, with the
// consumer index where it is.
func (q *completionQueue) use(r *cqRing) {
	q.buf, q.ring, q.ncqe, q.lgNCQE = r.mem, r.cqe0, r.mask+1, r.lg
	q.cur = r
	r.ci.Store(q.ci)
	q.live.Store(r) // after ci: a PollRing that loads r reads r's index
}

// initCQEs marks n CQEs of size bytes invalid, owned by the device.
func initCQEs(buf []byte, n, size uint32) {
	for i := uint32(0); i < n; i++ {
		buf[i*size+size-1] = cqeInvalid << cqeOpcodeShift
	}
}

func roundPow2(n uint32) uint32 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len32(n-1)
}

// Handle returns the kernel handle.
func (q *completionQueue) Handle() uint32 { return q.handle }

// Size returns the number of CQEs the CQ holds.
func (q *completionQueue) Size() int { return int(q.ncqe - 1) }

// cqe returns the 64-byte CQE at index i of the ring.
func (q *completionQueue) cqe(i uint32) *cqe64 {
	return (*cqe64)(unsafe.Add(q.ring, uintptr(i&(q.ncqe-1))*uintptr(q.cqeSize)))
}

// opOwn reads a CQE's op_own byte with one atomic load of its last word,
// which the device writes last.
func opOwn(c *cqe64) uint8 {
	return opOwnWord((*uint32)(unsafe.Pointer(&c[cqeWQECounter])))
}

// opOwnWord is opOwn from a pointer to the CQE's last word.
func opOwnWord(p *uint32) uint8 {
	w := atomic.LoadUint32(p)
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], w)
	return b[3]
}

// mine reports whether op_own oo, read at index i of a ring of 2^lg CQEs,
// is a CQE for software: a valid opcode, and the owner bit of the pass
// the index is on.
func mine(oo uint8, i, lg uint32) bool {
	return oo>>cqeOpcodeShift != cqeInvalid && uint32(oo&cqeOwnerMask) == i>>lg&1
}

// owned reports whether the CQE at index i is ours (mine), fenced so
// that the rest of it is read after its owner bit.
func (q *completionQueue) owned(i uint32) (*cqe64, bool) {
	c := q.cqe(i)
	if !mine(opOwn(c), i, q.lgNCQE) {
		return nil, false
	}
	readFence() // the owner bit before the rest of the CQE
	return c, true
}

// PollRing is cq.CQ.Poll, following cqseam.RingLock's protocol: an empty
// ring costs a look at one CQE's op_own, no lock and no system call; a
// released ring reads as empty.
//
// The look holds r, the ring it loaded, until it has read the CQE: r is
// compared with q.live after the read, which keeps it reachable (so
// retire's cleanup cannot unmap what is being read) and catches a ring
// retired in between: the retired memory reads as zeros, which may look
// empty or not, so a ring that is no longer live is polled under the
// lock, which sees the CQ as it is.
func (q *completionQueue) PollRing(wcs []cq.WC, l *cqseam.RingLock) (int, error) {
	if e := l.Err(); e != nil {
		if l.Draining() { // an overrun: what the ring holds comes first
			return q.drain(wcs, l)
		}
		return 0, *e
	}
	r := q.live.Load()
	if r == nil || !r.ready() && q.live.Load() == r {
		return 0, nil
	}
	l.Lock()
	if e := l.Err(); e != nil {
		l.Unlock()
		if l.Draining() {
			return q.drain(wcs, l)
		}
		return 0, *e
	}
	n := q.pollLocked(wcs)
	l.Unlock()
	return n, nil
}

// drain is PollRing on a CQ that overran (cqseam.RingLock.Draining): it
// hands out the completions the ring still holds, under the lock, and
// the overrun's error once it finds the ring empty.
func (q *completionQueue) drain(wcs []cq.WC, l *cqseam.RingLock) (int, error) {
	l.Lock()
	defer l.Unlock()
	if !l.Draining() {
		return 0, *l.Err() // the drain ended, or Close ran
	}
	return l.Drained(q.pollLocked(wcs))
}

// pollLocked moves up to len(wcs) completions out of the ring, finding each
// work request's wr_id in its QP, then publishes the consumer index once.
// A CQE that is no completion to report (of a destroyed QP, say) is
// consumed without one.
//
// It reads the owner bits of as many CQEs as it has slots left for, then
// fences once and reads the rest of them: one read barrier a batch (one
// orders every load before it against every load after it), where
// rdma-core fences for each CQE. A fence per CQE would be a quarter of
// a CQE's time on the host.
//
// Each CQE is turned into its completion here, not in a function of its
// own: Go keeps nothing in registers across a call, so a call a CQE would
// add its arguments, its frame and the reloads after it to each CQE.
// What is called is off the common path: the
// decoding of anything but a requester's CQE (decodeCQE) and the lookup
// of a QP that is not the run's (qpLookup.findNext).
func (q *completionQueue) pollLocked(wcs []cq.WC) int {
	n := 0
	ci := q.ci
	qps := &q.look
	if m := q.ctx.qps.Load(); m != qps.m { // the table, read once per batch
		*qps = qpLookup{m: m}
	}
	for n < len(wcs) {
		k := uint32(0)
		for int(k) < len(wcs)-n && mine(opOwn(q.cqe(ci+k)), ci+k, q.lgNCQE) {
			k++
		}
		if k == 0 {
			break
		}
		readFence() // the owner bits before the rest of the CQEs
		for end := ci + k; ci != end; ci++ {
			c := q.cqe(ci)
			qpn := c.qpn()
			key := qpn
			if q.ctx.cqeVersion == 1 {
				key = c.uidx()
			}
			qp := qps.find(key)
			if qp == nil || qp.gone {
				if qp != nil {
					qp.dropStale(c)
				}
				continue // a QP destroyed with completions still queued
			}
			w := &wcs[n]
			n++
			var ok bool
			switch op := c[cqeOpOwn] &^ (1<<cqeFormatShift - 1); { // opcode and format
			case op == cqeReq<<cqeOpcodeShift:
				ok = decodeReq(w, c, qpn) // a requester's, the commonest: inline
			case op == cqeRespSend<<cqeOpcodeShift && !qp.ud:
				decodeRecv(w, c, qpn) // a send received, the next commonest
				ok = true
			default:
				ok = decodeCQE(w, c, qp.ud)
			}
			if !ok && c[cqeSopDropQPN] == opUMR && c.opcode() == cqeReq && qp.sq.umrOp != nil {
				// A window's bind or invalidation: the WQE says which.
				*w = cq.WC{QPNum: qpn, Opcode: qp.sq.umrOpcode(c.wqeCounter())}
				ok = true
			}
			switch {
			case !ok:
				*w = cq.WC{Status: cq.GeneralErr, QPNum: qpn, VendorErr: uint32(c[cqeOpOwn])}
			case c.sendSide():
				w.WRID, qps.sqTail = qp.sq.complete(c.wqeCounter())
				qps.sqSet = true
			case qp.rq.wqeCnt != 0:
				w.WRID = qp.rq.completeRecv(c.wqeCounter())
				qps.rqDone++
			case qp.srq != nil:
				w.WRID = qp.srq.complete(c.wqeCounter()) // and the WQE is free again
			default:
				w.WRID = 0 // a QP without a receive queue of its own
			}
		}
	}
	qps.flush()
	if ci != q.ci {
		// Timestamps are read in a pass of their own, so that a CQ
		// without them pays one compare a call, not one a CQE. q.ci is
		// still where the call began: the device has none of these CQEs
		// back yet.
		if q.ts != cqseam.NoTimestamps {
			q.stampRun(wcs[:n], q.ci, ci-q.ci)
		}
		q.ci = ci
		q.setCI()
	}
	return n
}

// stampRun sets the Timestamps of run, the completions pollLocked just
// made of the k CQEs from index first, in order; it runs before the
// consumer index is published, while the device leaves those CQEs alone.
// A CQE of a QP no longer in the table made no completion: where the
// call met any (run is shorter than k), each CQE's QP is looked up
// again in the same table, as pollLocked found it.
//
// A timestamp is the device's ticks as they are, or, from a real-time
// clock (WallClock), its seconds (the upper 32 bits) and nanoseconds
// (the lower) as nanoseconds, as the kernel's mlx5 core reads them
// (mlx5_real_time_cyc2time). An error CQE has none (its vendor syndrome
// and syndrome bytes lie in the field): its completion's stays 0.
//
//go:noinline
func (q *completionQueue) stampRun(run []cq.WC, first, k uint32) {
	j := 0
	for i := first; i != first+k && j < len(run); i++ {
		c := q.cqe(i)
		if len(run) != int(k) && q.madeNone(c) {
			continue
		}
		w := &run[j]
		j++
		if w.Status != cq.Success {
			continue
		}
		t := be.Uint64(c[cqeTimestamp:])
		if q.ts == cqseam.WallClock {
			t = t>>32*1e9 + t&(1<<32-1)
		}
		w.Timestamp = t
	}
}

// madeNone reports whether pollLocked consumed CQE c without a
// completion: its QP is not in the table it polled with, or is a
// destroyed QP's stand-in.
func (q *completionQueue) madeNone(c *cqe64) bool {
	key := c.qpn()
	if q.ctx.cqeVersion == 1 {
		key = c.uidx()
	}
	if q.look.m == nil {
		return true
	}
	qp := (*q.look.m)[key]
	return qp == nil || qp.gone
}

// qpLookup finds the QPs the CQEs name in one version of the context's
// table (m): a run of CQEs of one QP (the common case) looks it up once.
// It also holds what the run has freed in that QP's queues, published
// when the batch goes on to another QP or ends (flush): one atomic store
// a run, not one a CQE.
type qpLookup struct {
	m      *map[uint32]*queuePair
	key    uint32
	last   *queuePair
	sqTail uint32 // last's new send queue tail, if sqSet
	sqSet  bool
	rqDone uint32 // receives of last completed, not yet added to its tail
}

// find returns the QP of key. The run's own QP is found inline; another
// goes through findNext.
func (l *qpLookup) find(key uint32) *queuePair {
	if l.last != nil && l.key == key {
		return l.last
	}
	return l.findNext(key)
}

// findNext ends the run of l.last (flush) and looks key up in the table.
func (l *qpLookup) findNext(key uint32) *queuePair {
	l.flush()
	if l.m == nil {
		return nil
	}
	l.key, l.last = key, (*l.m)[key]
	return l.last
}

// flush publishes the queue slots the run of CQEs of l.last freed.
func (l *qpLookup) flush() {
	if qp := l.last; qp != nil {
		// Release stores: only the QP's send CQ's Poll stores sq.tail, and
		// only its receive CQ's rq.tail, each under its CQ's lock (Reset
		// runs with the QP's completions cleaned out). The post that loads
		// a tail reuses the slots it frees, whose wr_ids were read above.
		if l.sqSet {
			release.Store32(&qp.sq.tail, l.sqTail)
			l.sqSet = false
		}
		if l.rqDone != 0 {
			release.Store32(&qp.rq.tail, qp.rq.tail.Load()+l.rqDone)
			l.rqDone = 0
		}
	}
}

// setCI tells the device how far the ring has been read, and PollRing.
func (q *completionQueue) setCI() {
	release.Store32(&q.cur.ci, q.ci) // only the locked side stores it
	storeBE32(unsafe.Add(q.db, dbrecSetCI), q.ci&0xffffff)
}

// ReqNotify arms the CQ: the arm word goes to the doorbell record, then,
// fenced on both sides, in one 8-byte store to the UAR page with the CQN.
func (q *completionQueue) ReqNotify(solicitedOnly bool) error {
	cmd := uint32(cqDBReqNot)
	if solicitedOnly {
		cmd = cqDBReqNotSol
	}
	arm := (q.armSN&3)<<28 | cmd | q.ci&0xffffff
	storeBE32(unsafe.Add(q.db, dbrecArm), arm)
	wcFence()
	mmioStore64(unsafe.Add(q.ctx.cqUAR.base, cqDoorbell), beWord64(uint64(arm)<<32|uint64(q.cqn)))
	wcFence()
	return nil
}

// EventRead advances the arm sequence number: the device ignores an arm
// that does not carry the number of events read so far.
func (q *completionQueue) EventRead() { q.armSN++ }

// ArmNeedsEventsRead is true: an arm made after the device raised an
// event and before EventRead counted it carries the sequence number the
// event used up, and the device ignores it (rdma-core counts at
// ibv_get_cq_event, mlx5_cq_event, as EventRead does).
func (q *completionQueue) ArmNeedsEventsRead() bool { return true }

// Resize moves the CQ to a ring of at least n entries. The device ends
// the old ring with a resize CQE; the completions before it are copied to
// the new ring, where the device goes on.
func (q *completionQueue) Resize(n int) (int, error) {
	if n <= 0 || n >= 1<<24 {
		return q.Size(), fmt.Errorf("%d entries: %w", n, unix.EINVAL)
	}
	ncqe := roundPow2(uint32(n) + 1)
	if ncqe == q.ncqe {
		return q.Size(), nil
	}
	if held := q.held(); held >= int(ncqe) {
		return q.Size(), fmt.Errorf("%d entries cannot hold the %d completions queued: %w", ncqe-1, held, unix.EINVAL)
	}
	fresh, err := newRing(ncqe, q.cqeSize)
	if err != nil {
		return q.Size(), err
	}
	req := uapi.Mlx5IBResizeCQ{BufAddr: uapi.NewPointer(fresh.mem.ptr()), CQESize: uint16(q.cqeSize)}
	if _, err := kverbs.ResizeCQ(q.ctx.conn, q.handle, ncqe-1, bytesOf(&req), nil); err != nil {
		fresh.mem.free()
		return q.Size(), err
	}
	// The kernel took the resize: the device writes to fresh from now on,
	// so fresh is the CQ's ring even when moveTo fails.
	err = q.moveTo(fresh)
	return q.Size(), err
}

// moveTo ends a resize, once the device has gone on to fresh: what the
// old ring holds up to the device's resize CQE is copied into fresh, each
// CQE to the index after its own (the resize CQE takes an index of the
// sequence), then fresh is published and the old ring retired. fresh is
// no one else's yet, so plain stores fill it.
//
// A device that wrote no resize CQE (which a correct one never does) still
// writes to fresh: moveTo then moves to it all the same, as rdma-core
// does, with what the old ring held left behind, and says so.
func (q *completionQueue) moveTo(fresh *cqRing) error {
	i := q.ci
	for {
		c, ok := q.owned(i)
		if !ok {
			// The kernel returned, so the device has written the marker.
			q.switchTo(fresh)
			return fmt.Errorf("mlx5 resize: no resize CQE in the old ring at %d, completions before it lost: %w", i, unix.EIO)
		}
		if c.opcode() == cqeResizeCQ {
			break
		}
		d := unsafe.Slice((*byte)(fresh.at(i+1)), cqeSize64)
		copy(d, c[:])
		d[cqeOpOwn] = d[cqeOpOwn]&^cqeOwnerMask | uint8((i+1)>>fresh.lg&1)
		i++
		if i-q.ci > q.ncqe {
			q.switchTo(fresh)
			return fmt.Errorf("mlx5 resize: no resize CQE in the old ring, its completions lost: %w", unix.EIO)
		}
	}
	q.ci++ // past the copied-over start: the index the resize CQE took
	q.switchTo(fresh)
	return nil
}

// switchTo publishes fresh as the CQ's ring and retires the old one.
func (q *completionQueue) switchTo(fresh *cqRing) {
	old := q.cur
	q.use(fresh)
	retire(old) // a PollRing may still be reading it
	q.setCI()
}

// held counts the completions in the ring now.
func (q *completionQueue) held() int {
	n := 0
	for i := q.ci; n < int(q.ncqe); i++ {
		if _, ok := q.owned(i); !ok {
			break
		}
		n++
	}
	return n
}

// clean removes the completions of the QP named key (user index or QPN)
// from the ring: walking back from the newest, every other CQE moves up
// by the number removed so far, keeping the owner bit of its new slot;
// then the consumer index passes the freed slots. The receive WQEs that
// removed completions of a QP on srq name go back to srq's free list, as
// polling them would have sent them.
func (q *completionQueue) clean(key uint32, srq *sharedRecvQueue) {
	prod := q.ci + uint32(q.held())
	freed := uint32(0)
	for i := prod; i != q.ci; {
		i--
		c := q.cqe(i)
		k := c.qpn()
		if q.ctx.cqeVersion == 1 {
			k = c.uidx()
		}
		switch {
		case k == key && c.opcode() != cqeResizeCQ:
			if srq != nil && !c.sendSide() {
				srq.complete(c.wqeCounter())
			}
			freed++
		case freed > 0:
			dst, src := q.slot(i+freed), q.slot(i)
			own := dst[len(dst)-1] & cqeOwnerMask
			copy(dst, src)
			dst[len(dst)-1] = dst[len(dst)-1]&^cqeOwnerMask | own
		}
	}
	if freed > 0 {
		q.ci += freed
		q.setCI()
	}
}

// slot returns the whole slot (64 or 128 bytes) of index i.
func (q *completionQueue) slot(i uint32) []byte {
	off := uintptr(i&(q.ncqe-1)) * uintptr(q.cqeSize)
	return q.buf[off : off+uintptr(q.cqeSize)]
}

// Destroy destroys the CQ in the kernel, then gives its ring back.
func (q *completionQueue) Destroy() (kverbs.Events, error) {
	ev, err := kverbs.DestroyCQ(q.ctx.conn, q.handle)
	if err != nil {
		return ev, err
	}
	q.Release()
	return ev, nil
}

// Release gives the ring back (retire) and frees the doorbell record.
// PollRing may run after it, and reads the CQ as empty; so does Poll,
// which finds releasedCQE at every index.
func (q *completionQueue) Release() {
	if q.buf == nil {
		return
	}
	q.live.Store(nil)
	retire(q.cur)
	q.cur, q.buf = nil, nil
	// A CQE size of 0 makes every index name the one CQE at q.ring; Size
	// stays what it was.
	q.ring, q.cqeSize = unsafe.Pointer(&releasedCQE), 0
	q.ctx.dbs.put(q.db)
	q.look = qpLookup{} // holds no QP once the CQ is gone
}

// releasedCQE is the ring of a released CQ: one invalid CQE, as words
// for opOwn's atomic load of the last one.
var releasedCQE = func() (c [cqeSize64 / 4]uint32) {
	c[len(c)-1] = binary.NativeEndian.Uint32([]byte{0, 0, 0, cqeInvalid << cqeOpcodeShift})
	return c
}()

// retire gives back a CQ ring that PollRing may still be reading, with
// no lock, on another goroutine: the ring of a destroyed or released CQ,
// or the old ring of a resized one. The device writes it no more (the
// kernel destroyed the CQ, or moved it to the new ring), but unmapping
// it now could fault that reader. So its pages are replaced at once, at
// the same address, by an anonymous read-only mapping that reads as
// zeros (PollRing polls under the lock when it finds its ring no longer
// live, whatever it read), and that placeholder is unmapped once the
// garbage collector finds r unreachable, when no PollRing can be reading
// it. Should the placeholder fail to map, the ring itself waits for the
// collector.
func retire(r *cqRing) {
	if r == nil || r.mem == nil {
		return
	}
	mem := r.mem
	// On failure the ring itself stays mapped, for the cleanup to unmap.
	_, _ = unix.MmapPtr(-1, 0, mem.ptr(), uintptr(len(mem)),
		unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED)
	// unix.Munmap finds the mapping by its first byte, which MAP_FIXED
	// kept. The cleanup's argument is the mapping, not r: r stays
	// collectable.
	runtime.AddCleanup(r, func(mem []byte) { unix.Munmap(mem) }, []byte(mem))
}

// storeBE32 stores v big-endian at p with one release store (package
// release): doorbell records are ordinary memory the device reads, and
// each is written by one side only (the CQ's consumer index under its
// lock; a queue's counter by its posts, which the caller serialises).
// On x86 that is a plain MOV, as rdma-core's store after
// udma_to_device_barrier (a compiler barrier there) compiles to;
// sync/atomic's Store would be an XCHG, a locked instruction each poll
// and post. Elsewhere it is sync/atomic's Store (STLR on arm64).
func storeBE32(p unsafe.Pointer, v uint32) {
	if !hostBigEndian {
		v = bits.ReverseBytes32(v) // one BSWAP: a PutUint32 into bytes read back natively compiled to shifts and ORs
	}
	release.Store32((*atomic.Uint32)(p), v)
}
