// Package fdturn serves the blocking reads of goverbs' event file
// descriptors, a completion channel's and a device context's async
// event fd: one reader at a time reads the fd, parked on the Go
// runtime's poller (not an OS thread) while nothing is queued, and its
// wait ends when its context does.
//
// A [Reader] holds the turn to read (a channel holding at most one
// token: taken by the reader, waited for with a select that also
// watches the waiter's context) and the fd's read deadline, which only
// the holder of the turn may move. It imports nothing of goverbs; cq
// and uverbs use it.
package fdturn

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Reader is the read side of one pollable file: the turn to read it
// and the wait on the runtime's poller. Init it before any other call.
// Its methods are safe for concurrent use; Wait only by the holder of
// the turn.
type Reader struct {
	f    *os.File
	rc   syscall.RawConn
	turn chan struct{} // holds a token while someone has the turn
	// kicked is set when f's read deadline was moved into the past (Kick):
	// the next Wait moves it back, and only then.
	kicked atomic.Bool
	shut   atomic.Bool // set by Shut: every Wait from then on ends at once
}

// aLongTimeAgo is a read deadline in the past: it wakes a parked reader.
var aLongTimeAgo = time.Unix(1, 0)

// Init binds r to f, which must be on the runtime's poller (os.NewFile of
// a non-blocking fd): it fails otherwise.
func (r *Reader) Init(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if err := f.SetReadDeadline(time.Time{}); err != nil { // fails if f is not on the poller
		return err
	}
	r.f, r.rc, r.turn = f, rc, make(chan struct{}, 1)
	return nil
}

// Control runs fn with the file's descriptor (syscall.RawConn.Control).
func (r *Reader) Control(fn func(fd uintptr)) error { return r.rc.Control(fn) }

// TryLock takes the turn if it is free and reports whether it did.
func (r *Reader) TryLock() bool {
	select {
	case r.turn <- struct{}{}:
		return true
	default:
		return false
	}
}

// Lock takes the turn, waiting for it, or returns ctx.Err() if ctx ends
// first. A ctx already done does not keep it from a free turn.
func (r *Reader) Lock(ctx context.Context) error {
	if r.TryLock() {
		return nil
	}
	select {
	case r.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unlock gives the turn back.
func (r *Reader) Unlock() { <-r.turn }

// Wait calls read with the file's descriptor until it returns true,
// parking on the runtime's poller while it returns false (read must
// read the fd before it returns false: the poller's watch is
// edge-triggered). It returns ctx.Err() when ctx ended the wait, and
// otherwise syscall.RawConn.Read's error: nil when read returned true,
// os.ErrDeadlineExceeded after a Kick or a Shut, and an error that is not
// os.ErrClosed once the file is closed (the caller's own flag should
// say so). The caller holds the turn.
//
// A ctx with a Done channel costs an allocation or two (context.AfterFunc);
// context.Background costs none.
func (r *Reader) Wait(ctx context.Context, read func(fd uintptr) bool) error {
	if r.kicked.CompareAndSwap(true, false) {
		_ = r.f.SetReadDeadline(time.Time{})
	}
	// After the deadline's reset: a Shut that this misses kicks after it.
	if r.shut.Load() {
		return os.ErrDeadlineExceeded
	}
	if ctx.Done() != nil {
		kicked := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			r.Kick()
			close(kicked)
		})
		defer func() {
			if !stop() {
				<-kicked // let it finish before the next Wait clears the deadline
			}
		}()
	}
	err := r.rc.Read(read)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Shut wakes the holder of the turn parked in Wait, as Kick does, and
// every later Wait returns at once: what the file's closer calls before
// it takes the turn to close the file.
func (r *Reader) Shut() {
	r.shut.Store(true)
	r.Kick()
}

// Kick wakes the holder of the turn parked in Wait, whose Wait then
// returns os.ErrDeadlineExceeded (or its ctx's error). It may run on any
// goroutine, with or without the turn. A Wait that begins after it is
// not woken: each Wait starts with the deadline cleared.
func (r *Reader) Kick() {
	r.kicked.Store(true)
	_ = r.f.SetReadDeadline(aLongTimeAgo)
}
