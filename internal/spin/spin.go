// Package spin is the lock of goverbs' ring paths: a CQ's consume and a
// QP's receive posts, critical sections of some tens of nanoseconds that
// make no system call. It is the lock rdma-core's providers take there
// (pthread_spin_lock): taking it is one compare-and-swap, and releasing it
// is a release store (internal/release: a plain MOV on x86). A sync.Mutex
// costs a second locked instruction to release, since it must learn
// whether a goroutine is parked on it; under QEMU's TCG, where the
// performance targets are measured, that is about 8 ns of a 90 ns poll.
//
// The price is what a spin lock costs: a waiter is not parked but keeps
// trying, first spinning, then yielding its P (runtime.Gosched), then
// sleeping between tries, so a holder that was descheduled or is in a
// system call (a CQ's ReqNotify, Resize and Close hold the lock across
// one) costs waiters little CPU, and there is no fairness: a waiter may
// lose to a goroutine that takes the lock again at once. Use it where the
// lock is held briefly and contention is rare; elsewhere, sync.Mutex.
package spin

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/internal/release"
)

// Lock is a mutual exclusion lock. The zero value is unlocked. A Lock must
// not be copied after first use.
type Lock struct {
	state atomic.Uint32 // 0 unlocked, 1 locked; go vet reports a copy
}

// How long lockSlow waits in each way before the next.
const (
	spins  = 64                   // tries in a row, for a holder running on another CPU
	yields = 256                  // tries, each after runtime.Gosched: the holder may need this P
	nap    = 5 * time.Microsecond // the sleep between tries after that
)

// Lock locks l, waiting until it is unlocked.
func (l *Lock) Lock() {
	if !l.state.CompareAndSwap(0, 1) {
		l.lockSlow()
	}
}

func (l *Lock) lockSlow() {
	for i := 0; ; i++ {
		if l.state.Load() == 0 && l.state.CompareAndSwap(0, 1) {
			return
		}
		switch {
		case i < spins:
		case i < spins+yields:
			runtime.Gosched()
		default:
			time.Sleep(nap)
		}
	}
}

// TryLock locks l if it is unlocked, and reports whether it did.
func (l *Lock) TryLock() bool { return l.state.CompareAndSwap(0, 1) }

// Unlock unlocks l, which must be locked (by any goroutine). Everything
// written while it was held is seen by the next goroutine to lock it.
func (l *Lock) Unlock() {
	if l.state.Load() == 0 {
		panic("spin: unlock of unlocked lock")
	}
	release.Store32(&l.state, 0)
}
