package uverbs_test

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uverbs"
)

func openRXE(t *testing.T) *uverbs.Context {
	t.Helper()
	testutil.RequireDevice(t, testutil.DevicePath)
	c, err := uverbs.Open("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestOpenClose(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.CheckFDLeak(t)
	for i := 0; i < 20; i++ {
		c, err := uverbs.Open("rxe0")
		if err != nil {
			t.Fatal(err)
		}
		if c.NumCompVectors() < 1 || c.Device().Name != "rxe0" {
			t.Fatalf("NumCompVectors %d, device %q", c.NumCompVectors(), c.Device().Name)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := c.Close(); !errors.Is(err, uverbs.ErrClosed) {
			t.Fatalf("second Close: err = %v, want ErrClosed", err)
		}
		if _, err := c.AllocPD(); !errors.Is(err, uverbs.ErrClosed) {
			t.Fatalf("AllocPD after Close: err = %v, want ErrClosed", err)
		}
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := uverbs.Open("nosuchdev7")
	if !errors.Is(err, unix.ENODEV) {
		t.Fatalf("err = %v, want ENODEV", err)
	}
	var op *uverbs.OpError
	if !errors.As(err, &op) || op.Op != "open" || op.Device != "nosuchdev7" {
		t.Errorf("err = %#v, want an *OpError for open nosuchdev7", err)
	}
}

func TestAllocBuffer(t *testing.T) {
	b, err := uverbs.AllocBuffer(5000)
	if err != nil {
		t.Fatal(err)
	}
	mem := b.Bytes()
	if len(mem) != 5000 {
		t.Errorf("len = %d, want 5000", len(mem))
	}
	if p := uintptr(unsafe.Pointer(&mem[0])); p%uintptr(unix.Getpagesize()) != 0 {
		t.Errorf("buffer at %#x is not page-aligned", p)
	}
	mem[4999] = 1
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if b.Bytes() != nil {
		t.Error("Bytes after Close is not nil")
	}
	for _, n := range []int{0, -1} {
		if _, err := uverbs.AllocBuffer(n); !errors.Is(err, unix.EINVAL) {
			t.Errorf("AllocBuffer(%d): err = %v, want EINVAL", n, err)
		}
	}
}

func TestPDAndMR(t *testing.T) {
	c := openRXE(t)
	testutil.CheckFDLeak(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := uverbs.AllocBuffer(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	if mr.LKey() == 0 || mr.RKey() == 0 || mr.Addr() != uint64(uintptr(unsafe.Pointer(&buf.Bytes()[0]))) {
		t.Errorf("lkey %#x rkey %#x addr %#x", mr.LKey(), mr.RKey(), mr.Addr())
	}
	// Go-heap memory (docs/MEMORY.md).
	heap := make([]byte, 3000)
	hmr, err := pd.RegMR(heap, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatalf("RegMR of Go-heap memory: %v", err)
	}
	// ibv_dealloc_pd(3): fails while resources use the PD.
	if err := pd.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("closing a PD with MRs: err = %v, want EBUSY", err)
	}
	for _, m := range []*uverbs.MR{mr, hmr} {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("second MR Close: %v", err)
		}
	}
	if err := pd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second PD Close: %v", err)
	}
	if _, err := pd.RegMR(heap, uverbs.AccessLocalWrite); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("RegMR on a closed PD: %v", err)
	}
}

func TestRegMRBadInput(t *testing.T) {
	c := openRXE(t)
	testutil.CheckFDLeak(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	mem := make([]byte, 4096)
	// Memory the kernel cannot pin: mapped with no access. (Not a range
	// unmapped first: any mapping made in between, by the runtime or
	// another goroutine, may take the hole, and did once in CI.)
	noAccess, err := unix.Mmap(-1, 0, 8192, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(noAccess)
	if mr, err := pd.RegMR(noAccess, uverbs.AccessLocalWrite); err == nil {
		mr.Close()
		t.Error("RegMR over memory mapped with no access succeeded")
	} else if !errors.Is(err, unix.EFAULT) {
		t.Errorf("RegMR over memory mapped with no access: err = %v, want EFAULT", err)
	} else {
		t.Log(err)
	}
	for _, tt := range []struct {
		name   string
		mem    []byte
		access uverbs.Access
	}{
		{"empty", nil, uverbs.AccessLocalWrite},
		// ibv_reg_mr(3): remote write needs local write.
		{"remote write without local write", mem, uverbs.AccessRemoteWrite},
		{"unknown access bit", mem, 1 << 30},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mr, err := pd.RegMR(tt.mem, tt.access)
			if err == nil {
				mr.Close()
				t.Fatal("accepted")
			}
			if !errors.Is(err, unix.EINVAL) {
				t.Errorf("err = %v, want EINVAL", err)
			}
			t.Log(err)
		})
	}
}
