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

// writeRecorder is a transport.Kernel that keeps the write commands it
// is sent.
type writeRecorder struct {
	writes [][]byte
	n      int // writes seen
	keep   bool
}

func (w *writeRecorder) Ioctl(unsafe.Pointer) unix.Errno { return unix.ENOSYS }
func (w *writeRecorder) Write(b []byte) unix.Errno {
	if w.n++; w.keep {
		w.writes = append(w.writes, append([]byte(nil), b...))
	}
	return 0
}

// The prebuilt doorbell is the POST_SEND command the general command
// builder makes (rdma-core's post_send_db: no work requests, wqe_size of
// struct ibv_send_wr), its reply pointing into the doorbell itself.
func TestSendDoorbell(t *testing.T) {
	k := &writeRecorder{keep: true}
	c := transport.NewKernelConn(-1, uapi.RDMA_DRIVER_RXE, k)
	d := NewSendDoorbell(0x1234)
	for range 2 {
		if err := d.Ring(c); err != nil {
			t.Fatal(err)
		}
	}
	cmd := new(transport.Cmd)
	req := transport.As[uapi.IBUverbsPostSend](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_POST_SEND, false,
		transport.SizeOf[uapi.IBUverbsPostSend](), transport.SizeOf[uapi.IBUverbsPostSendResp]()))
	req.QPHandle = 0x1234
	req.WqeSize = sizeofIBVSendWR
	if err := c.WriteRaw(cmd); err != nil {
		t.Fatal(err)
	}
	if len(k.writes) != 3 {
		t.Fatalf("%d writes, want 3", len(k.writes))
	}
	ne := binary.NativeEndian
	if got, want := ne.Uint64(k.writes[0][8:]), uint64(uintptr(unsafe.Pointer(&d.resp))); got != want {
		t.Errorf("response at %#x, want the doorbell's own reply at %#x", got, want)
	}
	built := k.writes[2]
	for _, w := range k.writes[:2] {
		ne.PutUint64(w[8:], ne.Uint64(built[8:])) // the reply addresses differ, nothing else
		if diff := cmp.Diff(built, w); diff != "" {
			t.Errorf("doorbell differs from the built command (-built +doorbell):\n%s", diff)
		}
	}
	k.keep = false
	if n := testing.AllocsPerRun(100, func() { d.Ring(c) }); n != 0 {
		t.Errorf("Ring allocates %v times", n)
	}
}
