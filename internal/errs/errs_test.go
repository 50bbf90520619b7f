package errs

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// An OpError whose cause is a deadline says Timeout, as net's errors do,
// and so does a *net.OpError whose cause it is: the form of rdmanet's
// failed Dial, which HTTP clients and retry loops ask ne.Timeout() of.
func TestOpErrorTimeout(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{os.ErrDeadlineExceeded, true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("i/o timeout: %w", context.DeadlineExceeded), true},
		{syscall.ETIMEDOUT, true},
		{syscall.EINVAL, false},
		{context.Canceled, false},
		{ErrClosed, false},
	} {
		oe := &OpError{Op: "connect", Device: "192.0.2.2:7471", Err: c.err}
		if got := oe.Timeout(); got != c.want {
			t.Errorf("%v: Timeout() %t, want %t", oe, got, c.want)
		}
		var ne net.Error = &net.OpError{Op: "dial", Net: "rdma", Err: oe}
		if got := ne.Timeout(); got != c.want {
			t.Errorf("%v: net.OpError's Timeout() %t, want %t", ne, got, c.want)
		}
	}
}

func TestQuote(t *testing.T) {
	if got := Quote("rxe0"); got != `"rxe0"` {
		t.Errorf("Quote(rxe0) = %s", got)
	}
	long := strings.Repeat("a", 1<<20)
	if got, want := Quote(long), `"`+long[:64]+`"... (1048576 bytes)`; got != want {
		t.Errorf("Quote of 1 MiB = %.100s, want %s", got, want)
	}
}
