package testutil

import (
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// ParseSize reads a size in bytes as the tests' flags and environment
// give it: "1GiB", "64MiB", "512KiB", "4096B" or "4096".
func ParseSize(v string) (int64, error) {
	s, shift := v, 0
	for _, u := range []struct {
		name  string
		shift int
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}} {
		if n, ok := strings.CutSuffix(s, u.name); ok {
			s, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > 1<<(62-shift) {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, KiB, MiB or GiB", v)
	}
	return n << shift, nil
}

// Watchdog fails t and calls stop (which should unblock what hangs) if
// progress stays put for limit, so that a stream that hangs fails in
// minutes, not when the test binary times out; the failure carries every
// goroutine's stack. The returned func ends the watch.
func Watchdog(t testing.TB, what string, progress *atomic.Int64, limit time.Duration, stop func()) func() {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		last, at := progress.Load(), time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if p := progress.Load(); p != last {
				last, at = p, time.Now()
				continue
			}
			if time.Since(at) >= limit {
				var b strings.Builder
				pprof.Lookup("goroutine").WriteTo(&b, 1)
				t.Errorf("%s: no progress for %v, stuck at %d bytes; goroutines:\n%s", what, limit, last, &b)
				stop()
				return
			}
		}
	}()
	return func() { close(done); <-ended }
}
