package uverbs_test

import (
	"errors"
	"math"
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
	c, pd, buf := pdBuffer(t, 8192)
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

// pdBuffer opens the test device, allocates a PD and n bytes of Buffer;
// the test's end closes the PD.
func pdBuffer(t *testing.T, n int) (*uverbs.Context, *uverbs.PD, *uverbs.Buffer) {
	t.Helper()
	c := rdmatest.Open(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	buf, err := uverbs.AllocBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	return c, pd, buf
}

// MR.SGE checks its range against the MR (issue 36: it did not, so a bad
// offset surfaced only as an error completion that had already moved the
// QP to ERR), and refuses after Close.
func TestSGEBounds(t *testing.T) {
	c, pd, buf := pdBuffer(t, 8192)
	defer buf.Close()
	mem := buf.Bytes()[100:4196] // 4096 bytes, not page-aligned
	mr, err := pd.RegMR(mem, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ off, n int }{{0, 4096}, {0, 0}, {4096, 0}, {4000, 96}, {17, 1}} {
		s, err := mr.SGE(r.off, r.n)
		want := uverbs.SGE{Addr: mr.Addr() + uint64(r.off), Length: uint32(r.n), LKey: mr.LKey()}
		if err != nil || s != want {
			t.Errorf("SGE(%d, %d) = %+v, %v; want %+v", r.off, r.n, s, err, want)
		}
	}
	for _, r := range []struct{ off, n int }{{4000, 97}, {4097, 0}, {-1, 1}, {0, -1}, {0, 4097}, {math.MaxInt, 1}, {1, math.MaxInt}, {math.MaxInt, math.MaxInt}} {
		s, err := mr.SGE(r.off, r.n)
		if !errors.Is(err, unix.EINVAL) || s != (uverbs.SGE{}) {
			t.Errorf("SGE(%d, %d) = %+v, %v; want EINVAL", r.off, r.n, s, err)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "make sge "+c.Device().Name+": ") || !strings.Contains(msg, "4096-byte MR") {
			t.Errorf("SGE(%d, %d): %q does not name the verb, the device and the MR's size", r.off, r.n, msg)
		}
	}
	if err := mr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mr.SGE(0, 8); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("SGE after Close: %v, want ErrClosed", err)
	}
}
