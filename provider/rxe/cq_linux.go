package rxe

import (
	"encoding/binary"
	"fmt"
	"github.com/goverbs/goverbs/internal/cqseam"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/release"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// completionQueue is an rxe completion queue: its ring holds struct ib_uverbs_wc
// entries, which the kernel produces and Poll consumes without a syscall.
//
// Its PollRing, which is cq.CQ.Poll, reads the ring's
// indices with no lock, concurrently with everything, and takes the CQ's
// lock only to consume. For that, a ring is never unmapped while it may
// be read: Destroy, Release and Resize retire it (retire), and the
// retired memory is given back only once nothing can reach it.
type completionQueue struct {
	conn   *transport.Conn
	handle uint32
	size   int
	ring   *queue                // Poll, Resize, Destroy: under the cq package's lock
	live   atomic.Pointer[queue] // the same ring, for PollRing's look; nil once released
	arm    *kverbs.CQArm         // REQ_NOTIFY_CQ, built once: arming allocates and builds nothing
}

// CreateCQ creates the CQ and maps its ring from the mmap info rxe returns.
func (c *context) CreateCQ(r provider.CQReq) (provider.CQ, error) {
	if r.Timestamps != cqseam.NoTimestamps {
		// Refused here, with no command: rxe_create_cq refuses every CQ
		// flag, the timestamp one included, on every kernel, and rxe's
		// completion timestamp mask is 0.
		return nil, fmt.Errorf("rxe has no completion timestamps (%v asked; rxe_create_cq refuses CQ flags with %w): %w",
			r.Timestamps, unix.EOPNOTSUPP, errs.ErrNotSupported)
	}
	var resp uapi.RxeCreateCQResp
	k, err := kverbs.CreateCQ(c.conn, r.CQReq, nil, bytesOf(&resp))
	if err != nil {
		return nil, err
	}
	ring, err := mapQueue(c.fd, resp.Mi, unsafe.Sizeof(uapi.IBUverbsWC{}))
	if err != nil {
		kverbs.DestroyCQ(c.conn, k.Handle)
		return nil, fmt.Errorf("rxe cq ring: %w", err)
	}
	q := &completionQueue{conn: c.conn, handle: k.Handle, size: int(k.CQE), ring: ring, arm: kverbs.NewCQArm(k.Handle)}
	q.live.Store(ring)
	return q, nil
}

// Handle returns the kernel handle.
func (q *completionQueue) Handle() uint32 { return q.handle }

// Size returns the number of CQEs the CQ holds.
func (q *completionQueue) Size() int { return q.size }

// PollRing is cq.CQ.Poll, following cqseam.RingLock's protocol: an empty
// ring costs two loads of its indices, no lock and no system call; a
// released ring reads as empty. Under the lock it acquire-loads the
// producer index, copies each slot, and release-stores the consumer
// index once. It never passes the producer and never takes a CQE without
// a slot for it. Both indices are masked as they are read, as rdma-core's
// queue_empty does: an index the kernel (or a stray store) left out of
// range cannot make it hand back more than the ring holds.
func (q *completionQueue) PollRing(wcs []cq.WC, l *cqseam.RingLock) (int, error) {
	// The error word is read only when the look finds no ring: Close
	// releases the ring (Release) before it stores ErrClosed, and the
	// uverbs layer breaks it (Break) after Fail stores an overrun, so a
	// look that finds a ring is ordered before both.
	r := q.live.Load()
	if r == nil {
		if e := l.Err(); e != nil {
			if l.Draining() { // an overrun: what the ring holds comes first
				return q.pollLocked(wcs, l)
			}
			return 0, *e
		}
		return 0, nil
	}
	// Equal indices mean an empty ring. The look compares them as they
	// are, without masking: indices out of range only ever send it on to
	// the lock, under which they are masked and found to hold nothing.
	c, p := r.cons.Load(), r.prod.Load() // p: acquire
	if c == p {
		return 0, nil
	}
	// One completion into one slot, the poll of a latency loop, has a
	// path of its own that makes no call but the rare fix-up's, which
	// keeps pollLocked's frame, the spills around its calls and its
	// loop's setup off the latency path. Under the lock the look's ring is
	// still the CQ's unless a Resize or Close replaced it (pollLocked then
	// starts over), and the error word need not be read: an overrun that
	// Fail records after the look lets this completion out first
	// (RingLock's step 3).
	if len(wcs) != 1 {
		return q.pollLocked(wcs, l)
	}
	l.Lock()
	if q.ring != r {
		return q.unlockPoll(wcs, l)
	}
	c, p = r.cons.Load(), r.prod.Load() // p: acquire
	i := c & r.mask
	if i == p&r.mask {
		return q.unlockPoll(wcs, l) // taken since the look, or out of range
	}
	k := (*uapi.IBUverbsWC)(unsafe.Add(r.data, uintptr(i)*r.step)) // i is masked
	// convertWC by hand: with its call to fixWC it is over the inliner's
	// budget, and a call here costs the latency path a frame and spills.
	if copySlot(&wcs[0], unsafe.Pointer(k)) != 0 {
		fixWC(&wcs[0], k)
	}
	release.Store32(r.cons, (i+1)&r.mask) // the kernel may reuse the slot
	l.Unlock()
	return 1, nil
}

// unlockPoll gives the lock back and polls by pollLocked.
//
//go:noinline
func (q *completionQueue) unlockPoll(wcs []cq.WC, l *cqseam.RingLock) (int, error) {
	l.Unlock()
	return q.pollLocked(wcs, l)
}

// pollLocked is PollRing past the look: it takes the lock and up to
// len(wcs) completions from the CQ's ring, read again, not the look's: a
// Resize may have replaced it and a Close released it, and another Poll
// may have taken completions since.
func (q *completionQueue) pollLocked(wcs []cq.WC, l *cqseam.RingLock) (int, error) {
	l.Lock()
	e := l.Err() // nil, or an overrun being drained: see the end
	if e != nil && !l.Draining() {
		l.Unlock()
		return 0, *e
	}
	r := q.ring
	if r == nil {
		l.Unlock()
		return 0, nil
	}
	// In locals: the stores into wcs could alias r as far as the compiler
	// knows, and would make it load them again for every CQE.
	base, step, mask := r.data, r.step, r.mask
	first := r.cons.Load() & mask // our own index
	prod := r.prod.Load() & mask  // the kernel's: acquire
	n := min(int((prod-first)&mask), len(wcs))
	// The slots are read in at most two runs, to the ring's end and on
	// from its start.
	for out, at := wcs[:n], first; len(out) > 0; at = 0 {
		run := out[:min(len(out), int(mask+1-at))]
		copyRun(run, unsafe.Add(base, uintptr(at)*step), step)
		out = out[len(run):]
	}
	if n > 0 {
		release.Store32(r.cons, (first+uint32(n))&mask) // the kernel may reuse the slots
	}
	if e != nil { // an overrun: the error once the ring is empty
		n, err := l.Drained(n)
		l.Unlock()
		return n, err
	}
	l.Unlock()
	return n, nil
}

// copyRun converts len(run) consecutive slots, the first at start and each
// step bytes past the one before, into run. It copies them all, then
// fixes up those with an error or flags, if any: a loop of its own that
// makes no call keeps its values in registers, which pollLocked's many
// live values would otherwise take.
//
//go:noinline
func copyRun(run []cq.WC, start unsafe.Pointer, step uintptr) {
	// The last slot is copied after the loop, so that k never points
	// past the ring's end, nor w past run's (checkptr rejects such a
	// pointer). w steps by a WC's size rather than being indexed: one
	// add a slot where an index costs a multiply and an add, which pays
	// for the store that zeroes Timestamp.
	last := len(run) - 1
	k, w, odd := start, &run[0], uint32(0)
	for range last {
		odd |= copySlot(w, k)
		k = unsafe.Add(k, step)
		w = (*cq.WC)(unsafe.Add(unsafe.Pointer(w), unsafe.Sizeof(*w)))
	}
	odd |= copySlot(w, k)
	if odd == 0 {
		return
	}
	for i := range run {
		if kw := (*uapi.IBUverbsWC)(unsafe.Add(start, uintptr(i)*step)); kw.Status|kw.WCFlags != 0 {
			fixWC(&run[i], kw)
		}
	}
}

// copySlot copies the slot at k into w as it is, and returns what says
// whether fixWC must finish it (its status and flags). Imm keeps the
// slot's ex word, which rxe clears in every completion it makes and
// fills only with a flag that sends it to fixWC (make_send_cqe and
// do_complete memset the CQE first), so it is 0 here without another
// store: rdma-core's rxe provider copies the slot the same way.
func copySlot(w *cq.WC, k unsafe.Pointer) uint32 {
	*(*uapi.IBUverbsWC)(unsafe.Pointer(w)) = *(*uapi.IBUverbsWC)(k) // the same layout: see convertWC
	w.Timestamp = 0                                                 // rxe has no completion timestamps
	kw := (*uapi.IBUverbsWC)(k)
	return kw.Status | kw.WCFlags
}

// The kernel's completion flags (enum ib_wc_flags), which rxe writes as
// they are.
const (
	kwcGRH            = 1 << 0
	kwcWithImm        = 1 << 1
	kwcWithInvalidate = 1 << 2
	kwcIPCsumOK       = 1 << 3
)

// wcFlags translates the kernel's four low flag bits to ours: WITH_INVALIDATE
// is 4 there and IP_CSUM_OK 8, the reverse of ours, and immediate data and
// an invalidated rkey share one word, the immediate data winning. The
// kernel's other bits (WITH_SMAC, WITH_VLAN, …) are not reported.
var wcFlags = func() (t [16]cq.Flags) {
	for i := range t {
		if i&kwcGRH != 0 {
			t[i] |= cq.WithGRH
		}
		if i&kwcIPCsumOK != 0 {
			t[i] |= cq.IPCsumOK
		}
		switch {
		case i&kwcWithImm != 0:
			t[i] |= cq.WithImm
		case i&kwcWithInvalidate != 0:
			t[i] |= cq.WithInv
		}
	}
	return t
}()

// cq.WC begins laid out as struct ib_uverbs_wc, field by field, so
// convertWC copies the slot whole (rxe's C provider copies it into ibv_wc
// with memcpy for the same reason) and fixes up what differs; WC's
// Timestamp, which rxe never has, follows the copied part and is zeroed.
// These lines compile only while the layouts agree.
var (
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.Timestamp) - unsafe.Sizeof(uapi.IBUverbsWC{})]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(cq.WC{}) - unsafe.Sizeof(uapi.IBUverbsWC{}) - 8]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.Status) - unsafe.Offsetof(uapi.IBUverbsWC{}.Status)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.Opcode) - unsafe.Offsetof(uapi.IBUverbsWC{}.Opcode)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.VendorErr) - unsafe.Offsetof(uapi.IBUverbsWC{}.VendorErr)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.ByteLen) - unsafe.Offsetof(uapi.IBUverbsWC{}.ByteLen)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.Imm) - unsafe.Offsetof(uapi.IBUverbsWC{}.Ex)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.QPNum) - unsafe.Offsetof(uapi.IBUverbsWC{}.QPNum)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.SrcQP) - unsafe.Offsetof(uapi.IBUverbsWC{}.SrcQP)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.Flags) - unsafe.Offsetof(uapi.IBUverbsWC{}.WCFlags)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.PKeyIndex) - unsafe.Offsetof(uapi.IBUverbsWC{}.PkeyIndex)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.SLID) - unsafe.Offsetof(uapi.IBUverbsWC{}.Slid)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.SL) - unsafe.Offsetof(uapi.IBUverbsWC{}.Sl)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(cq.WC{}.DLIDPathBits) - unsafe.Offsetof(uapi.IBUverbsWC{}.DlidPathBits)]struct{}{}
)

// convertWC translates one ib_uverbs_wc. On an error completion only
// wr_id, status, qp_num and vendor_err mean anything; the rest is zeroed.
// The trailing port_num and reserved bytes land in cq.WC's padding.
// PollRing's one-completion path and copyRun do the same, a slot at a
// time.
func convertWC(w *cq.WC, k *uapi.IBUverbsWC) {
	if copySlot(w, unsafe.Pointer(k)) != 0 {
		fixWC(w, k)
	}
}

// fixWC finishes copySlot's copy of a completion with flags or an error.
// It stays out of line, so that the copy is inlined into the poll's loops.
//
//go:noinline
func fixWC(w *cq.WC, k *uapi.IBUverbsWC) {
	if k.Status != uint32(cq.Success) {
		*w = cq.WC{WRID: k.WRID, Status: cq.Status(k.Status), VendorErr: k.VendorErr, QPNum: k.QPNum}
		return
	}
	fl := k.WCFlags
	w.Flags = wcFlags[fl&0xf]
	switch {
	case fl&kwcWithImm != 0: // __be32 imm_data, as sent
		w.Imm = binary.BigEndian.Uint32(k.Ex[:])
	case fl&kwcWithInvalidate != 0: // invalidate_rkey, in host order
		w.Imm = binary.NativeEndian.Uint32(k.Ex[:])
		provider.PeerInvalidated(w.Imm)
	}
}

// ReqNotify arms the CQ through the kernel (REQ_NOTIFY_CQ): rxe keeps the
// arm state in the kernel, where the completion is posted.
func (q *completionQueue) ReqNotify(solicitedOnly bool) error {
	return q.arm.Arm(q.conn, solicitedOnly)
}

// Resize resizes the CQ in the kernel (RESIZE_CQ), which copies the
// unconsumed completions into a new ring (from our consumer index, which
// Poll keeps current in the ring), then maps the new ring. rxe refuses a
// size below the number of completions held (EINVAL).
func (q *completionQueue) Resize(n int) (int, error) {
	var resp uapi.RxeResizeCQResp
	cqe, err := kverbs.ResizeCQ(q.conn, q.handle, uint32(n), nil, bytesOf(&resp))
	if err != nil {
		return q.size, err
	}
	ring, err := mapQueue(q.conn.FD(), resp.Mi, unsafe.Sizeof(uapi.IBUverbsWC{}))
	if err != nil {
		return q.size, fmt.Errorf("rxe resized cq ring: %w", err)
	}
	old := q.ring
	q.ring, q.size = ring, int(cqe)
	q.live.CompareAndSwap(old, ring) // not if broken (Break): that stays
	retire(old)
	return q.size, nil
}

// Break takes the ring from PollRing's look, for a CQ the kernel reported
// broken (an overrun), once the cqseam.RingLock holds the error: PollRing
// then polls under the lock until the ring is drained, and returns that
// error from then on. The ring stays mapped, for Destroy; a Resize
// leaves the look without a ring.
func (q *completionQueue) Break() { q.live.Store(nil) }

// EventRead does nothing: rxe has no arm sequence number.
func (q *completionQueue) EventRead() {}

// ArmNeedsEventsRead is false: the kernel arms an rxe CQ whatever events
// it raised (rxe_req_notify_cq sets the CQ's notify flag), so an arm made
// before the last event is read counts.
func (q *completionQueue) ArmNeedsEventsRead() bool { return false }

// Destroy destroys the CQ in the kernel, then gives its ring back.
func (q *completionQueue) Destroy() (kverbs.Events, error) {
	ev, err := kverbs.DestroyCQ(q.conn, q.handle)
	if err != nil {
		return ev, err
	}
	q.Release()
	return ev, nil
}

// Release gives the ring back (retire): Poll must not run after it,
// PollRing may, and reads the CQ as empty.
func (q *completionQueue) Release() {
	q.live.Store(nil)
	if q.ring != nil {
		retire(q.ring)
		q.ring = nil
	}
}

// retire gives a CQ ring back that PollRing may still be reading,
// lock-free, on another goroutine. Unmapping it now could fault that reader, so the
// ring's pages (the kernel's memory, which the mapping holds, and the
// mapping's reference on the uverbs file) are replaced at once, at the
// same address, by an anonymous read-only mapping that reads as zeros:
// an empty ring. That placeholder is unmapped once the garbage collector
// finds r unreachable, when no PollRing can be reading it. Should the
// placeholder fail to map, the ring itself waits for the collector.
func retire(r *queue) {
	if r.mem == nil {
		return
	}
	mem := r.mem
	if _, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(mem)), uintptr(len(mem)),
		unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED); err != nil {
		mem = r.mem // still the ring: unmapped by the cleanup all the same
	}
	// unix.Munmap finds the mapping by its first byte, which MAP_FIXED kept.
	runtime.AddCleanup(r, func(mem []byte) { unix.Munmap(mem) }, mem)
}
