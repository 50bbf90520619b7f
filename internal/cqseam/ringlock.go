package cqseam

import (
	"sync"
	"sync/atomic"
)

// RingLock is the CQ's side of a provider ring's poll: the CQ's lock and
// its error word. A ring's PollRing (see NewCQ), in this order:
//
//  1. returns *l.Err() if it is not nil and the CQ is not Draining: the
//     CQ is closed or broken (a ring whose look finds no ring once its CQ
//     is closed or broken, which Close and the backend that calls Fail
//     see to, may read the error word only then); while it is Draining,
//     goes on to step 3;
//  2. returns 0 if the ring is empty, reading it without the lock: the
//     ring may be given back (Close, Resize) at the same time, so the
//     provider keeps a ring it gave back readable, reading as empty,
//     until nothing can reach it;
//  3. takes l.Lock, returns *l.Err() (unlocking) if it is now set and
//     the CQ is not Draining, consumes up to len(wcs) completions, and,
//     while Draining, returns l.Drained(n) for the n it consumed; then
//     l.Unlock.
//
// In step 3 a ring that can tell, under the lock, that Close has not run
// (its ring is still the one it looked at: Close releases it under the
// lock) may leave the error word unread: an overrun that Fail records
// between steps 1 and 3 then lets this one Poll out first, ordered before
// the Fail, as it would have been had it run a moment earlier.
//
// So two Polls never take the same completion, and a Poll never reads a
// ring that Close or Resize (which hold the lock) has unmapped.
type RingLock struct {
	mu  sync.Mutex
	err atomic.Pointer[error]
	// drain is err while err is an overrun (Fail) whose ring still holds
	// the completions that came before it: Poll hands them out before
	// err. Another value (nil once drained; err replaced by Close) means
	// no drain.
	drain atomic.Pointer[error]
}

// Err returns the error every Poll returns from now on, or nil.
func (l *RingLock) Err() *error { return l.err.Load() }

// Lock takes the CQ's lock: a Poll that consumes, and the CQ's
// ReqNotify, Resize, Close and event accounting.
func (l *RingLock) Lock() { l.mu.Lock() }

// Unlock releases it.
func (l *RingLock) Unlock() { l.mu.Unlock() }

// Fail records the error that broke the CQ (an overrun). Poll first
// hands out what the ring still holds (the CQ is Draining), and returns
// the error from the first Poll that finds the ring empty on. The first
// error stays; Close's ErrClosed replaces it. It takes no lock: it may
// run with any lock held.
func (l *RingLock) Fail(err error) {
	p := &err
	// drain before err, so a look that finds err finds drain; where err
	// is already set (an earlier Fail, or Close), the two differ and no
	// drain begins.
	if l.drain.CompareAndSwap(nil, p) {
		l.err.CompareAndSwap(nil, p)
	}
}

// Draining reports whether Fail recorded an overrun whose ring is not yet
// drained: Poll still hands out what the ring holds. Only under the lock
// is the answer final.
func (l *RingLock) Draining() bool {
	d := l.drain.Load()
	return d != nil && d == l.err.Load()
}

// Drained is step 3's result while Draining, under the lock, for the n
// completions the Poll consumed: (n, nil) while there were any; once a
// Poll finds the ring empty, the drain ends and the error is returned,
// by that Poll and every later one.
func (l *RingLock) Drained(n int) (int, error) {
	if n > 0 {
		return n, nil
	}
	l.drain.Store(nil)
	return 0, *l.err.Load()
}

// Close makes *p the error every Poll returns from now on (ErrClosed),
// ending any drain. The CQ calls it under the lock, after its ring is
// given back.
func (l *RingLock) Close(p *error) { l.err.Store(p) }
