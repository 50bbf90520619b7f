//go:build linux

package uverbs

import "sync/atomic"

// Hooks for the external tests of queries and async events.

// SetGIDTableMax makes GIDTable ask QUERY_GID_TABLE for at most n entries,
// so that a table with more valid GIDs takes the entry-by-entry path. It
// returns the function that restores the default.
func SetGIDTableMax(n int) (restore func()) {
	old := gidTableMax
	gidTableMax = n
	return func() { gidTableMax = old }
}

// NewAsyncTestContext returns a Context with no device behind it: enough
// for its registry of async-event acks, not for any verb.
func NewAsyncTestContext() *Context { return new(Context) }

// TrackAsync is trackAsync.
func (c *Context) TrackAsync(k ElementKind, h uint64) *atomic.Uint32 { return c.trackAsync(k, h) }

// UntrackAsync is untrackAsync.
func (c *Context) UntrackAsync(k ElementKind, h uint64) { c.untrackAsync(k, h) }

// ReadAsyncEventFrom reads one event the way TryAsyncEvent does, from fd
// (a pipe the test fills) instead of the device's async fd.
func (c *Context) ReadAsyncEventFrom(fd int) (AsyncEvent, bool, error) {
	var buf [asyncEventSize]byte
	return c.events.read(fd, &buf)
}
