package testutil

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalTB records a Fatalf and ends the goroutine, as testing's does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestTogether(t *testing.T) {
	boom := errors.New("boom")
	errs := Together(t,
		Step{Name: "slow", Limit: time.Minute, Fn: func() error { time.Sleep(20 * time.Millisecond); return boom }},
		Step{Name: "fast", Limit: time.Minute, Fn: func() error { return nil }})
	if errs[0] != boom || errs[1] != nil {
		t.Errorf("Together returned %v, want [boom <nil>]", errs)
	}

	// A step past its limit fails the test, naming it, with the stacks.
	f := &fatalTB{TB: t}
	hang := make(chan struct{})
	defer close(hang)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		Together(f,
			Step{Name: "quick", Limit: time.Minute, Fn: func() error { return nil }},
			Step{Name: "parked", Limit: 50 * time.Millisecond, Fn: func() error { <-hang; return nil }})
	}()
	<-ended
	if !strings.Contains(f.msg, "parked did not return within 50ms") || !strings.Contains(f.msg, "goroutine ") {
		t.Errorf("Fatalf message:\n%s", f.msg)
	}
}
