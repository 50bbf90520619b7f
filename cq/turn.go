package cq

import (
	"context"
	"sync/atomic"
)

// turnLock is a Channel's turn to read its fd: a lock whose Lock can be
// given up when a context ends. Free, it is taken with one
// compare-and-swap and given back with a store and a load, where the
// one-token channel it replaced cost a Wait a select (the runtime's
// selectgo, sorting and locking its cases) and a receive, each with the
// channel's own lock: about 450 instructions an event, a third of what
// a Wait cost beyond rdma-core's ibv_get_cq_event.
//
// An acquirer that finds it held counts itself in waiters, tries again
// and parks on wake; a release that sees waiters leaves a token there
// (the channel holds one; a token no one takes costs the next parked
// acquirer one more try). The count is raised before the second try and
// read after the release's store, both sequentially consistent, so a
// release either sees the waiter or is seen by its second try.
type turnLock struct {
	held    atomic.Bool
	waiters atomic.Int32
	wake    chan struct{} // capacity 1
}

func newTurnLock() turnLock { return turnLock{wake: make(chan struct{}, 1)} }

// tryLock takes the turn if it is free.
func (t *turnLock) tryLock() bool { return t.held.CompareAndSwap(false, true) }

// lock takes the turn, or returns ctx.Err() if ctx ends first. A ctx
// already done does not stop it from taking a free turn.
func (t *turnLock) lock(ctx context.Context) error {
	if t.tryLock() {
		return nil
	}
	return t.lockSlow(ctx)
}

func (t *turnLock) lockSlow(ctx context.Context) error {
	t.waiters.Add(1)
	defer t.waiters.Add(-1)
	for !t.tryLock() {
		select {
		case <-t.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// unlock gives the turn back, waking one parked acquirer if any.
func (t *turnLock) unlock() {
	t.held.Store(false)
	if t.waiters.Load() != 0 {
		select {
		case t.wake <- struct{}{}:
		default: // a token is there already
		}
	}
}
