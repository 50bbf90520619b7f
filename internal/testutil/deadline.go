package testutil

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Step is a call a test bounds: Fn must return within Limit of its start.
type Step struct {
	Name  string
	Limit time.Duration
	Fn    func() error
}

// Within runs fn in a goroutine of its own and returns its error. If fn
// has not returned after limit, it fails tb (Fatalf, so call it from the
// test's goroutine) naming the step, with every goroutine's stack; the
// goroutine running fn is left behind.
func Within(tb testing.TB, name string, limit time.Duration, fn func() error) error {
	tb.Helper()
	return Together(tb, Step{Name: name, Limit: limit, Fn: fn})[0]
}

// Together runs the steps' funcs in goroutines of their own, released at
// one moment, and returns their errors in the steps' order. A step that
// has not returned Limit after the release fails tb as Within does.
func Together(tb testing.TB, steps ...Step) []error {
	tb.Helper()
	type result struct {
		i   int
		err error
	}
	gate := make(chan struct{})
	done := make(chan result, len(steps))
	for i, s := range steps {
		go func() {
			<-gate
			done <- result{i, s.Fn()}
		}()
	}
	start := time.Now()
	close(gate)
	errs := make([]error, len(steps))
	returned := make([]bool, len(steps))
	for n := 0; n < len(steps); {
		// The earliest deadline of the steps still running.
		next := -1
		for i, s := range steps {
			if !returned[i] && (next < 0 || s.Limit < steps[next].Limit) {
				next = i
			}
		}
		t := time.NewTimer(time.Until(start.Add(steps[next].Limit)))
		select {
		case r := <-done:
			t.Stop()
			errs[r.i], returned[r.i] = r.err, true
			n++
		case <-t.C:
			select {
			case r := <-done: // it came as the timer fired
				errs[r.i], returned[r.i] = r.err, true
				n++
				continue
			default:
			}
			tb.Fatalf("%s did not return within %v; goroutines:\n%s", steps[next].Name, steps[next].Limit, Stacks())
		}
	}
	return errs
}

// Stacks returns every goroutine's stack (runtime.Stack's, growing its
// buffer until they fit).
func Stacks() string {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// OneOf reports whether err is one of allowed: a nil entry allows
// success, any other one an error that errors.Is it.
func OneOf(err error, allowed ...error) bool {
	for _, a := range allowed {
		if a == nil && err == nil || a != nil && errors.Is(err, a) {
			return true
		}
	}
	return false
}

// CheckOneOf fails tb unless err is one of allowed (OneOf), naming the
// call.
func CheckOneOf(tb testing.TB, name string, err error, allowed ...error) {
	tb.Helper()
	if !OneOf(err, allowed...) {
		tb.Errorf("%s: %v, want one of %v", name, err, allowed)
	}
}

// OnlyOne checks what two closes of one object returned: one closed it,
// the other said closed (an error wrapping it).
func OnlyOne(tb testing.TB, what string, errs []error, closed error) {
	tb.Helper()
	CheckOneOf(tb, what, errs[0], nil, closed)
	CheckOneOf(tb, what, errs[1], nil, closed)
	if (errs[0] == nil) == (errs[1] == nil) {
		tb.Errorf("two %ss: %v and %v, want one nil and one %v", what, errs[0], errs[1], closed)
	}
}

// CloseAgain closes once more, within limit, what a test may have closed
// already: an error wrapping closed is fine, any other fails tb.
func CloseAgain(tb testing.TB, name string, limit time.Duration, closed error, fn func() error) {
	tb.Helper()
	if err := Within(tb, name, limit, fn); err != nil && !errors.Is(err, closed) {
		tb.Errorf("%s: %v", name, err)
	}
}

// Rounds is how many times a looped test runs: the number in the
// environment variable env, or def when it is unset or not a positive
// number.
func Rounds(env string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(env)); err == nil && v > 0 {
		return v
	}
	return def
}
