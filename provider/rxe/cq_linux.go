package rxe

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/release"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// CQ is an rxe completion queue: its ring holds struct ib_uverbs_wc
// entries, which the kernel produces and Poll consumes without a syscall.
//
// It is a cq.Ring: PollRing, which cq.CQ.Poll calls, reads the ring's
// indices with no lock, concurrently with everything, and takes the CQ's
// lock only to consume. For that, a ring is never unmapped while it may
// be read: Destroy, Release and Resize retire it (retire), and the
// retired memory is given back only once nothing can reach it.
type CQ struct {
	conn   *transport.Conn
	handle uint32
	size   int
	ring   *queue                // Poll, Resize, Destroy: under the cq package's lock
	live   atomic.Pointer[queue] // the same ring, for PollRing's look; nil once released
	arm    *kverbs.CQArm         // REQ_NOTIFY_CQ, built once: arming allocates and builds nothing
}

// CreateCQ creates the CQ and maps its ring from the mmap info rxe returns.
func (c *context) CreateCQ(r kverbs.CQReq) (provider.CQ, error) {
	var resp uapi.RxeCreateCQResp
	k, err := kverbs.CreateCQ(c.conn, r, nil, bytesOf(&resp))
	if err != nil {
		return nil, err
	}
	ring, err := mapQueue(c.fd, resp.Mi, unsafe.Sizeof(uapi.IBUverbsWC{}))
	if err != nil {
		kverbs.DestroyCQ(c.conn, k.Handle)
		return nil, fmt.Errorf("rxe cq ring: %w", err)
	}
	q := &CQ{conn: c.conn, handle: k.Handle, size: int(k.CQE), ring: ring, arm: kverbs.NewCQArm(k.Handle)}
	q.live.Store(ring)
	return q, nil
}

// Handle returns the kernel handle.
func (q *CQ) Handle() uint32 { return q.handle }

// Size returns the number of CQEs the CQ holds.
func (q *CQ) Size() int { return q.size }

// PollRing is cq.CQ.Poll, following cq.RingLock's protocol: an empty
// ring costs two loads of its indices, no lock and no system call; a
// released ring reads as empty.
//
// It consumes in the same call, not through a second function that
// would load the ring's fields again and make a frame of its own: under
// QEMU's TCG, where the targets are measured, a call and its return cost
// about as much as a CQE's copy. One CQE is copied here; a batch by
// copyRing, one call for all of them; pollLocked serves a CQ whose lock
// is taken, and every surprise. Either way: acquire-load the producer
// index, copy each slot, release-store the consumer index once. It
// never passes the producer and never takes a CQE without a slot for it. Both indices are masked as they are read, as
// rdma-core's queue_empty does: an index the kernel (or a stray store)
// left out of range cannot make it hand back more than the ring holds.
func (q *CQ) PollRing(wcs []cq.WC, l *cq.RingLock) (int, error) {
	// The error word is read only when the look finds no ring: Close
	// releases the ring (Release) before it stores ErrClosed, and the
	// uverbs layer breaks it (Break) after Fail stores an overrun, so a
	// look that finds a ring is ordered before both.
	//
	// Each atomic Load is on the line of the test of its value: the
	// compiler marks where it inlined a call with a no-op unless an
	// instruction of the caller's stands on the call's line (three
	// instructions a poll, counted).
	var r *queue
	if r = q.live.Load(); r == nil {
		if e := l.Err(); e != nil {
			return 0, *e
		}
		return 0, nil
	}
	// Equal indices mean an empty ring. The look compares them as they
	// are, without masking: indices out of range (which the locked path
	// masks) only ever send it to that path, which then finds nothing.
	cons, prod := r.cons, r.prod
	var c, p uint32
	if c, p = cons.Load(), prod.Load(); c == p { // p: acquire
		return 0, nil
	}
	// The lock free: the commonest call, taken here. One completion is
	// copied on a path that returns from no call (the rare fix-up goes to
	// fixOne, the rest of a poll that finds the lock taken or the ring
	// replaced to pollLocked), so nothing is kept on the stack for it. (A
	// value live across a call is spilled before it, on every path the
	// call is reachable from, and TCG charges for every memory access.)
	// A batch keeps three values across copyRing and reads the rest again
	// from q. Any surprise (the lock taken, the ring replaced, gone or
	// found empty) goes to pollLocked, which starts over.
	//
	// Under the lock the ring is still r unless a Resize replaced it or
	// Close released it (both under the lock), so the look's pointers
	// serve. The error word is not read again: Close also releases the
	// ring, which the comparison sees, and an overrun that Fail records
	// after the look may let this one completion out first (RingLock's
	// step 3). Both indices are read again: another Poll may have taken
	// completions since the look, even the ring's size of them, which
	// would bring the consumer index back to where the look saw it with
	// the look's producer index stale (the indices wrap at the ring's
	// size).
	//
	// A single-threaded CQ is served on a branch of its own, tested
	// first; on the other, the inlined TryLock's own test of l.single
	// folds away and the CAS's outcome is branched on at once. (Written
	// len(wcs) == 1 && l.TryLock(), the outcome became a boolean, true on
	// the single-threaded path, tested again after the join.) With that,
	// the error word left alone and no bounds check (wcs has one
	// element), a call costs 11 instructions fewer.
	mask := r.mask
	var first, last uint32 // the consumer index and the producer's, masked
	if l.Single() {
		// A single-threaded CQ: no other Poll, and no Resize or Close,
		// runs at the same time (cq.WithSingleThreaded), so the look's
		// ring and indices stand: no lock, nothing read again.
		first, last = c&mask, p&mask
	} else {
		if !l.TryLock() {
			return q.pollLocked(wcs, l)
		}
		if q.ring != r {
			return q.unlockPoll(wcs, l)
		}
		first, last = cons.Load()&mask, prod.Load()&mask // acquire
	}
	if first == last {
		return q.unlockPoll(wcs, l) // out of range, or taken since the look
	}
	if len(wcs) == 1 {
		k := (*uapi.IBUverbsWC)(unsafe.Add(r.data, uintptr(first)*r.step))
		w := unsafe.SliceData(wcs)
		if copyWC(w, k) != 0 {
			return fixOne(w, k, cons, (first+1)&mask, l)
		}
		release.Store32(cons, (first+1)&mask) // the kernel may reuse the slot
		l.Unlock()
		return 1, nil
	}
	if len(wcs) == 0 {
		return q.unlockPoll(wcs, l) // which finds nothing to do
	}
	n := min(int((last-first)&mask), len(wcs))
	if copyRing(unsafe.Pointer(unsafe.SliceData(wcs)), n, r.walk(first)) != 0 {
		r = q.ring
		fixRing(wcs[:n], r.walk(r.cons.Load()&r.mask))
	}
	r = q.ring
	release.Store32(r.cons, (r.cons.Load()+uint32(n))&r.mask) // the kernel may reuse the slots
	l.Unlock()
	return n, nil
}

// fixOne finishes PollRing's one-completion path for a completion that
// needs fixWC: it fixes w up from its slot k, gives the slot back (next in
// the consumer index cons) and the lock. Out of line, so that PollRing
// keeps nothing for after a call.
//
//go:noinline
func fixOne(w *cq.WC, k *uapi.IBUverbsWC, cons *atomic.Uint32, next uint32, l *cq.RingLock) (int, error) {
	fixWC(w, k)
	release.Store32(cons, next) // the kernel may reuse the slot
	l.Unlock()
	return 1, nil
}

// unlockPoll gives the lock back and polls by pollLocked, for PollRing
// when the ring it took the lock for turned out empty or replaced (or
// wcs empty). Out of line, so that nothing in PollRing outlives a call:
// Unlock may call to wake a waiter, and wcs, live after it, would be
// stored on the stack on every Poll.
//
//go:noinline
func (q *CQ) unlockPoll(wcs []cq.WC, l *cq.RingLock) (int, error) {
	l.Unlock()
	return q.pollLocked(wcs, l)
}

// pollLocked is PollRing's general path, from taking the lock on: for a
// CQ whose lock PollRing found taken, and every surprise. Its last lines
// repeat PollRing's on purpose: shared through a function, they would
// cost PollRing's batches a frame and the spills around a call, which
// is what taking batches in PollRing saved.
//
//go:noinline
func (q *CQ) pollLocked(wcs []cq.WC, l *cq.RingLock) (int, error) {
	l.Lock()
	if e := l.Err(); e != nil {
		l.Unlock()
		return 0, *e
	}
	r := q.ring // a Resize may have replaced the ring PollRing read
	if r == nil {
		l.Unlock()
		return 0, nil
	}
	// In locals: the stores into wcs could alias r as far as the compiler
	// knows, and would make it reload them for every CQE.
	mask, base := r.mask, r.data
	first := r.cons.Load() & mask // our own index
	prod := r.prod.Load() & mask  // the kernel's: acquire
	n := min(int((prod-first)&mask), len(wcs))
	if n == 0 { // no slot to take, or none to put it in: the index stays as it is
		l.Unlock()
		return 0, nil
	}
	// Copy every slot, then fix up the few completions that need it
	// (errors, flags) in a second pass, out of line: the slots stay ours
	// until the consumer index moves. One CQE is copied here; more by
	// copyRing, a leaf where the loop's state has the registers to itself
	// (here, the values live across the loop would be reloaded from the
	// stack in every iteration). Across that call only n is kept: what the
	// rest needs is read again from q, not kept on the stack (a store and
	// a load each); under the lock the ring and its consumer index stay
	// as they are.
	if n == 1 {
		d, k := unsafe.SliceData(wcs), (*uapi.IBUverbsWC)(unsafe.Add(base, uintptr(first)*r.step))
		if copyWC(d, k) != 0 {
			fixWC(d, k)
		}
	} else if copyRing(unsafe.Pointer(unsafe.SliceData(wcs)), n, r.walk(first)) != 0 {
		r = q.ring
		fixRing(wcs[:n], r.walk(r.cons.Load()&r.mask))
	}
	r = q.ring
	release.Store32(r.cons, (r.cons.Load()+uint32(n))&r.mask) // the kernel may reuse the slots
	l.Unlock()
	return n, nil
}

// ringWalk steps through a ring's slots by byte offset from base, the
// cheapest walk under TCG: the next offset is (off+step)&wrap, with no
// branch at the ring's end and no shift by a variable count.
type ringWalk struct {
	base       unsafe.Pointer // slot 0
	off        uintptr        // where the walk is: a byte offset from base
	step, wrap uintptr        // the slot size; the ring's size in bytes, less one
}

// walk returns a walk of r's slots from slot i, masked.
func (r *queue) walk(i uint32) ringWalk {
	return ringWalk{base: r.data, off: uintptr(i) * r.step, step: r.step, wrap: (uintptr(r.mask)+1)*r.step - 1}
}

// copyRing copies n completions, at least one (PollRing and pollLocked
// call it for two or more), from the ring slots w walks to d, n cq.WCs, and returns
// their statuses and flags ORed (copyWC).
//
// It walks d with a pointer and counts down, not by index: under an
// instruction count (test/vm -qemuicount) that is two instructions a
// CQE fewer than &wcs[i]'s multiply and the count's compare. The
// pointer moves on only while a completion is left for it, never past
// the end. It takes a pointer and a count, not a slice: a slice's
// pointer argument is stored to the stack on entry, for nothing (Go
// issue 71868).
func copyRing(d unsafe.Pointer, n int, w ringWalk) (fix uint32) {
	for {
		fix |= copyWC((*cq.WC)(d), (*uapi.IBUverbsWC)(unsafe.Add(w.base, w.off)))
		if n--; n == 0 {
			return fix
		}
		w.off = (w.off + w.step) & w.wrap
		d = unsafe.Add(d, unsafe.Sizeof(cq.WC{}))
	}
}

// fixRing runs fixWC over the completions copyRing copied from the same
// slots that need it.
//
//go:noinline
func fixRing(wcs []cq.WC, w ringWalk) {
	for i := range wcs {
		if k := (*uapi.IBUverbsWC)(unsafe.Add(w.base, w.off)); k.Status|k.WCFlags != 0 {
			fixWC(&wcs[i], k)
		}
		w.off = (w.off + w.step) & w.wrap
	}
}

// Poll is PollRing for a caller that holds the CQ's lock already (the
// provider.CQ interface): the ring's lock is then a private one.
func (q *CQ) Poll(wcs []cq.WC) int {
	var l cq.RingLock
	n, _ := q.PollRing(wcs, &l)
	return n
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

// cq.WC is laid out as struct ib_uverbs_wc, field by field (rxe's user
// library copies the slot into ibv_wc with memcpy for the same reason), so
// convertWC copies the slot whole and fixes up two fields. These lines
// compile only while the layouts agree.
var (
	_ [0]struct{} = [unsafe.Sizeof(cq.WC{}) - unsafe.Sizeof(uapi.IBUverbsWC{})]struct{}{}
	_ [0]struct{} = [unsafe.Sizeof(cq.WC{}) - unsafe.Sizeof(wcWords{})]struct{}{}
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
// PollRing does the same with copyWC, inlined there, and fixWC.
func convertWC(w *cq.WC, k *uapi.IBUverbsWC) {
	if copyWC(w, k) != 0 {
		fixWC(w, k)
	}
}

// copyWC copies the slot whole, with Imm zeroed, and returns its status
// and flags ORed: not zero when it needs fixWC (an error or flags, the
// rare case), which also puts Imm back where a flag says it is one.
//
// The same layout (checked above), 48 bytes, is copied as six words: the
// trailing port_num and reserved bytes land in cq.WC's padding. Words,
// not a struct copy: the compiler copies structs with SSE moves, which
// cost QEMU's TCG (our test machines) twice as much. One statement a word,
// so that each is loaded and stored in one register. Status (bytes 8-11)
// and wc_flags (bytes 36-39) are taken from the words as they pass, and
// Imm (bytes 24-27) masked out of its word: every memory access saved
// counts under TCG.
//
// It must stay small enough to be inlined into Poll's loop: a call per
// CQE, with the loop's registers spilled around it, cost about a third of
// the per-CQE time under TCG.
func copyWC(w *cq.WC, k *uapi.IBUverbsWC) (fix uint32) {
	d, src := (*wcWords)(unsafe.Pointer(w)), (*wcWords)(unsafe.Pointer(k))
	lo, hi := halves()
	d.w0 = src.w0
	w1 := src.w1
	d.w1 = w1
	d.w2 = src.w2
	d.w3 = src.w3 &^ (0xffffffff << lo)
	w4 := src.w4
	d.w4 = w4
	d.w5 = src.w5
	return uint32(w1>>lo) | uint32(w4>>hi)
}

// wcWords is a completion as six words (fields, not an array: cheaper
// for the inliner).
type wcWords struct{ w0, w1, w2, w3, w4, w5 uint64 }

// halves returns where the first and the second 4-byte field of an
// 8-byte word sit in it: shift counts the compiler folds to constants.
func halves() (first, second uint64) {
	if cpu.IsBigEndian {
		return 32, 0
	}
	return 0, 32
}

// fixWC finishes convertWC for a completion with flags or an error.
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
	}
}

// ReqNotify arms the CQ through the kernel (REQ_NOTIFY_CQ): rxe keeps the
// arm state in the kernel, where the completion is posted.
func (q *CQ) ReqNotify(solicitedOnly bool) error {
	return q.arm.Arm(q.conn, solicitedOnly)
}

// Resize resizes the CQ in the kernel (RESIZE_CQ), which copies the
// unconsumed completions into a new ring (from our consumer index, which
// Poll keeps current in the ring), then maps the new ring. rxe refuses a
// size below the number of completions held (EINVAL).
func (q *CQ) Resize(n int) (int, error) {
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
// broken (an overrun), once the cq.RingLock holds the error: PollRing
// then returns that error. The ring stays mapped, for Destroy; a Resize
// leaves the look without a ring.
func (q *CQ) Break() { q.live.Store(nil) }

// EventRead does nothing: rxe has no arm sequence number.
func (q *CQ) EventRead() {}

// Destroy destroys the CQ in the kernel, then gives its ring back.
func (q *CQ) Destroy() (kverbs.Events, error) {
	ev, err := kverbs.DestroyCQ(q.conn, q.handle)
	if err != nil {
		return ev, err
	}
	q.Release()
	return ev, nil
}

// Release gives the ring back (retire): Poll must not run after it,
// PollRing may, and reads the CQ as empty.
func (q *CQ) Release() {
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
