package mlx5

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/errs"
)

// The device model's UAR pages and rings are ordinary memory, which
// mmio_other.go's sync/atomic bodies order: this package's model tests
// open it on a refused GOARCH too (make bigendian runs them on s390x).
// TestOpenRefuses puts the refusal back for its own run.
var testRefusal = archRefusal

func init() { archRefusal = nil }

// TestOpenRefuses: on a GOARCH without device barriers Open fails before
// it asks the kernel for anything, with the error naming the GOARCH.
func TestOpenRefuses(t *testing.T) {
	want := testRefusal
	if want != nil && want.Error() != refusal(runtime.GOARCH).Error() {
		t.Errorf("archRefusal = %v, want %v", want, refusal(runtime.GOARCH))
	}
	if want == nil {
		want = refusal("mips") // this GOARCH has barriers: pretend it does not
	}
	archRefusal = want
	defer func() { archRefusal = nil }()

	_, conn, fd := modelConn(t)
	pc, kc, err := driver{}.Open(conn, fd)
	if err == nil {
		closeAsync(kc)
		pc.Close()
		t.Fatal("Open succeeded")
	}
	if err != want || !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "GOARCH=") {
		t.Errorf("Open: %v, want %v", err, want)
	}
	if kc.AsyncFD != -1 {
		t.Errorf("Open returned async fd %d, want -1", kc.AsyncFD)
	}
}
