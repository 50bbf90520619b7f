// Package mutex is the lock of goverbs' hot paths (a CQ's poll, a QP's
// posts): a mutual-exclusion lock taken with one compare-and-swap and, on
// x86, given back with one plain store, as rdma-core's pthread spin locks
// are, where a sync.Mutex gives itself back with a second locked
// instruction (under QEMU's TCG, where goverbs' targets are measured, a
// Lock and Unlock cost 8–12 ns less than a sync.Mutex's: 16 against 25 ns
// in one run, 35 against 47 in another).
//
// A sync.Mutex needs that second locked instruction to learn, in the same
// step as it lets go, whether a goroutine is parked on it. A plain store
// followed by a load of a waiter count cannot learn it alone: x86 lets the
// load run before the store is seen (store-load reordering), so the
// unlocker could read "no waiters" while a waiter, counting itself in at
// that moment, still reads "locked", and the waiter would sleep with the
// lock free. Here the waiter closes that window itself: after it counts
// itself in, it asks the kernel for a memory barrier on every running
// thread of the process (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED,
// Linux 4.14). After that, an unlocker has either made its store visible
// (and the waiter's next try finds the lock free) or has yet to load the
// count (and finds the waiter there, and wakes it). This moves the cost of
// the fence from every unlock to the rare wait, which already costs a
// park and a wake-up.
//
// Where membarrier(2) is missing or refused (a kernel before 4.14, a
// seccomp filter), a parked waiter also wakes on a timer (backstop), so a
// wake-up lost in that window costs at most that long, never a hang. On
// other architectures, and in builds with the race detector, the release
// store is sync/atomic's Store, which the load that follows it cannot
// pass (sync/atomic is sequentially consistent): no barrier is needed.
//
// Waiters first spin briefly (the locked sections are a few hundred
// nanoseconds at most), then park on a sync.Cond until an Unlock wakes
// one. There is no hand-off and no starvation mode: a goroutine arriving
// at a free lock takes it ahead of a woken one, which parks again.
package mutex

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/internal/release"
)

// Mutex is a mutual-exclusion lock. The zero Mutex is unlocked. A Mutex
// must not be copied after first use.
type Mutex struct {
	state   atomic.Uint32 // 1 while held
	waiters atomic.Int32  // goroutines counted in by lockSlow
	// park is where waiters park, made by the first one: a Mutex stays
	// 16 bytes, so a CQ's error word shares its cache line.
	park atomic.Pointer[parking]
}

// parking is a Mutex's waiting room.
type parking struct {
	mu    sync.Mutex // the waiters' turn, and cond's lock
	cond  sync.Cond
	timer *time.Timer // the backstop, without membarrier(2) on x86
}

// Lock takes m, waiting for it if it is held.
func (m *Mutex) Lock() {
	if !m.state.CompareAndSwap(0, 1) {
		m.lockSlow()
	}
}

// TryLock takes m if it is free and reports whether it did. A held lock
// costs one load, no locked instruction.
func (m *Mutex) TryLock() bool {
	return m.state.Load() == 0 && m.state.CompareAndSwap(0, 1)
}

// Grab is TryLock without its look: it takes m if it is free and reports
// whether it did, in one locked instruction whatever m's state, as Lock's
// first step does (and rdma-core's spin lock). For a fast path that
// expects m free: there the look is three instructions, one a load, for
// nothing (counted in cq's poll, docs/PERFORMANCE.md); a caller that
// retries while m is held wants TryLock, whose failures write nothing.
func (m *Mutex) Grab() bool { return m.state.CompareAndSwap(0, 1) }

// Unlock gives m back, waking a waiter if there is one. Unlocking a Mutex
// that is not locked is a bug (it is not detected).
func (m *Mutex) Unlock() {
	// release.Store32's store, written out: through the call, Unlock would
	// cost more than the inliner allows a cq.RingLock.Unlock around it.
	if release.Plain {
		*(*uint32)(unsafe.Pointer(&m.state)) = 0 // a release store on x86: see package release
	} else {
		m.state.Store(0)
	}
	// On x86 this load may be ordered before the plain store: a waiter
	// counted in at that moment has fenced (lockSlow), so the store is
	// visible to it.
	if m.waiters.Load() != 0 {
		m.wake()
	}
}

// fence is barrier; tests replace it to run the backstop.
var fence = barrier

// spins is how many times lockSlow looks at the lock before it parks.
const spins = 64

// backstop is how long a parked waiter sleeps at most where it could not
// fence the unlockers (on x86 without membarrier(2)): the longest a wake-up
// lost to store-load reordering can keep it from a free lock.
const backstop = time.Millisecond

func (m *Mutex) lockSlow() {
	for range spins {
		if m.TryLock() {
			return
		}
	}
	p := m.park.Load()
	if p == nil {
		p = new(parking)
		p.cond.L = &p.mu
		if !m.park.CompareAndSwap(nil, p) {
			p = m.park.Load()
		}
	}
	p.mu.Lock()
	m.waiters.Add(1)
	// Every Unlock that stored before this returns has its store visible
	// now; every later one loads the count after it.
	timed := release.Plain && !fence()
	for !m.TryLock() {
		if timed {
			if p.timer == nil {
				p.timer = time.AfterFunc(backstop, m.wake)
			} else {
				p.timer.Reset(backstop)
			}
		}
		p.cond.Wait()
	}
	m.waiters.Add(-1)
	p.mu.Unlock()
}

// wake wakes one parked waiter. Taking mu orders it after a waiter that
// has counted itself in but not yet parked: that one parks (releasing mu)
// before the wake-up, or finds the lock free and does not park.
//
//go:noinline
func (m *Mutex) wake() {
	p := m.park.Load() // made before the waiter counted itself in
	p.mu.Lock()
	p.cond.Signal()
	p.mu.Unlock()
}
