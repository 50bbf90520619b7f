package kverbs

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// ioctlRecorder is a transport.Kernel that keeps the ioctls it is sent
// (header and attributes, as bytes) and refuses write(2).
type ioctlRecorder struct {
	ioctls [][]byte
	keep   bool
}

func (r *ioctlRecorder) Ioctl(hdr unsafe.Pointer) unix.Errno {
	if r.keep {
		n := binary.NativeEndian.Uint16(unsafe.Slice((*byte)(hdr), 2)) // ib_uverbs_ioctl_hdr.length
		r.ioctls = append(r.ioctls, append([]byte(nil), unsafe.Slice((*byte)(hdr), n)...))
	}
	return 0
}
func (r *ioctlRecorder) Write([]byte) unix.Errno { return unix.ENOSYS }

// CQArm sends, from its second arm on, the very ioctl its first arm of the
// same kind built, and the two kinds differ: nothing is built again.
func TestCQArmResends(t *testing.T) {
	k := &ioctlRecorder{}
	c := transport.NewKernelConn(-1, uapi.RDMA_DRIVER_RXE, k)
	if !c.UsesInvokeWrite() { // probe before recording
		t.Fatal("the recorder's kernel should take INVOKE_WRITE")
	}
	k.keep = true
	a := NewCQArm(0x42)
	for _, sol := range []bool{false, false, true, true, false} {
		if err := a.Arm(c, sol); err != nil {
			t.Fatal(err)
		}
	}
	if len(k.ioctls) != 5 {
		t.Fatalf("%d ioctls, want 5", len(k.ioctls))
	}
	for i, j := range map[int]int{1: 0, 3: 2, 4: 0} {
		if diff := cmp.Diff(k.ioctls[j], k.ioctls[i]); diff != "" {
			t.Errorf("arm %d differs from arm %d, which built it (-built +resent):\n%s", i, j, diff)
		}
	}
	if cmp.Equal(k.ioctls[0], k.ioctls[2]) {
		t.Error("the solicited arm is the same ioctl as the plain one")
	}
	// The solicited arm is what the general builder makes of it.
	solicited := k.ioctls[2]
	var ref transport.Cmd
	k.ioctls = nil
	if err := ReqNotifyCQ(c, &ref, 0x42, true); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(k.ioctls[0], solicited); diff != "" {
		t.Errorf("CQArm's solicited arm differs from ReqNotifyCQ's (-ReqNotifyCQ +CQArm):\n%s", diff)
	}
	k.keep = false
	if n := testing.AllocsPerRun(100, func() { a.Arm(c, false) }); n != 0 {
		t.Errorf("Arm allocates %v times", n)
	}
}

// Without INVOKE_WRITE, every arm is a write(2) command, the same each time.
func TestCQArmWriteSyscall(t *testing.T) {
	k := &writeRecorder{keep: true}
	c := transport.NewKernelConn(-1, uapi.RDMA_DRIVER_RXE, k)
	a := NewCQArm(7)
	for range 3 {
		if err := a.Arm(c, true); err != nil {
			t.Fatal(err)
		}
	}
	if len(k.writes) != 3 {
		t.Fatalf("%d writes, want 3", len(k.writes))
	}
	for _, w := range k.writes[1:] {
		if diff := cmp.Diff(k.writes[0], w); diff != "" {
			t.Errorf("arms differ (-first +later):\n%s", diff)
		}
	}
}
