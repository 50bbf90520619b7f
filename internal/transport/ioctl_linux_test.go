package transport

import (
	"errors"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
)

func openDevice(t *testing.T) int {
	t.Helper()
	testutil.RequireDevice(t, testutil.DevicePath)
	f, err := os.OpenFile(testutil.DevicePath, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

// getContext sends DEVICE/GET_CONTEXT with its optional NUM_COMP_VECTORS
// output and returns what the kernel wrote there.
func getContext(fd int, driverID uint32) (vectors uint32, valid bool, err error) {
	out := make([]uint32, 1) // heap memory the kernel writes to
	attrs := []Attr{{
		AttrID: UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS,
		Len:    4,
		Flags:  UVERBS_ATTR_F_MANDATORY,
		Data:   uint64(uintptr(unsafe.Pointer(&out[0]))),
	}}
	err = Invoke(fd, driverID, UVERBS_OBJECT_DEVICE, UVERBS_METHOD_GET_CONTEXT, attrs)
	return out[0], attrs[0].Flags&UVERBS_ATTR_F_VALID_OUTPUT != 0, err
}

func TestGetContextRXE(t *testing.T) {
	fd := openDevice(t)
	vectors, valid, err := getContext(fd, RDMA_DRIVER_RXE)
	if err != nil {
		t.Fatalf("GET_CONTEXT with driver_id RXE: %v", err)
	}
	if !valid {
		t.Errorf("the kernel did not set UVERBS_ATTR_F_VALID_OUTPUT on NUM_COMP_VECTORS")
	}
	if vectors < 1 {
		t.Errorf("num_comp_vectors = %d, want at least 1", vectors)
	}
	t.Logf("num_comp_vectors = %d", vectors)
	// One ucontext per fd: a second GET_CONTEXT is refused.
	if _, _, err := getContext(fd, RDMA_DRIVER_RXE); !errors.Is(err, unix.EINVAL) {
		t.Errorf("second GET_CONTEXT on one fd: err = %v, want EINVAL", err)
	}
}

// rdma-facts §0.1: a driver_id that does not match the device gives
// EINVAL, even for core methods.
func TestGetContextWrongDriverID(t *testing.T) {
	fd := openDevice(t)
	if _, _, err := getContext(fd, RDMA_DRIVER_MLX5); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("GET_CONTEXT with driver_id MLX5 on rxe: err = %v, want EINVAL", err)
	}
	// The refusal left the fd unused: the right driver_id still works.
	if _, _, err := getContext(fd, RDMA_DRIVER_RXE); err != nil {
		t.Fatalf("GET_CONTEXT with driver_id RXE after the refusal: %v", err)
	}
}

func TestLayouts(t *testing.T) {
	if s := unsafe.Sizeof(Hdr{}); s != 24 {
		t.Errorf("sizeof(ib_uverbs_ioctl_hdr) = %d, want 24", s)
	}
	if o := unsafe.Offsetof(Hdr{}.DriverID); o != 16 {
		t.Errorf("offsetof(driver_id) = %d, want 16", o)
	}
	if o := unsafe.Offsetof(Attr{}.Data); o != 8 {
		t.Errorf("offsetof(ib_uverbs_attr.data) = %d, want 8", o)
	}
}
