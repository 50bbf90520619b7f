package uverbs_test

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// Buffer.Close refuses while an MR is registered over the buffer (its
// memory would vanish under the device and under MR.Bytes, whose next
// touch is a SIGSEGV: issue 36), and leaves the buffer mapped; once the
// MR is closed, or its context is, it unmaps.
func TestBufferCloseUnderMR(t *testing.T) {
	c := rdmatest.Open(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	buf, err := uverbs.AllocBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	// Two MRs: one at the start, one over the second page only.
	mr1, err := pd.RegMR(buf.Bytes()[:100], uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	mr2, err := pd.RegMR(buf.Bytes()[4096:], uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	err = buf.Close()
	if !errors.Is(err, unix.EBUSY) {
		t.Fatalf("Buffer.Close under two MRs: %v, want EBUSY", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "free buffer "+c.Device().Name+": ") || !strings.Contains(msg, "2 ") {
		t.Errorf("error %q: want the verb, the device and the count", msg)
	}
	mr2.Bytes()[0] = 1 // still mapped
	if buf.Bytes() == nil {
		t.Fatal("Bytes is nil after a refused Close")
	}
	if err := mr2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := buf.Close(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("Buffer.Close under one MR: %v, want EBUSY", err)
	}
	mr1.Bytes()[0] = 1
	if err := mr1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := buf.Close(); err != nil {
		t.Fatalf("Buffer.Close after its MRs: %v", err)
	}
	if err := buf.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}

	// An MR whose context closed is gone from the kernel: it no longer
	// holds the buffer.
	c2 := rdmatest.Open(t)
	pd2, err := c2.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf2, err := uverbs.AllocBuffer(64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd2.RegMR(buf2.Bytes(), uverbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if err := buf2.Close(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("Buffer.Close under an MR: %v, want EBUSY", err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := buf2.Close(); err != nil {
		t.Fatalf("Buffer.Close after the MR's context closed: %v", err)
	}
}
