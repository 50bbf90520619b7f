package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uapi"
)

const (
	objPD, objCQ, objAsyncEvent = uapi.UVERBS_OBJECT_PD, uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_OBJECT_ASYNC_EVENT
	methodGetContext            = uapi.UVERBS_METHOD_GET_CONTEXT
	attrNumCompVectors          = uapi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS
	attrCoreSupport             = uapi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT
	methodCQCreate              = uapi.UVERBS_METHOD_CQ_CREATE
	methodCQDestroy             = uapi.UVERBS_METHOD_CQ_DESTROY
	methodPDDestroy             = uapi.UVERBS_METHOD_PD_DESTROY
	methodAsyncEventAlloc       = uapi.UVERBS_METHOD_ASYNC_EVENT_ALLOC
	cmdGetContext               = uapi.IB_USER_VERBS_CMD_GET_CONTEXT
	cmdAllocPD                  = uapi.IB_USER_VERBS_CMD_ALLOC_PD
	cmdDeallocPD                = uapi.IB_USER_VERBS_CMD_DEALLOC_PD
	cmdReqNotifyCQ              = uapi.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ
	driverRXE, driverMLX5       = uapi.RDMA_DRIVER_RXE, uapi.RDMA_DRIVER_MLX5
)

func open(t *testing.T) *Conn {
	t.Helper()
	testutil.RequireDevice(t, testutil.DevicePath)
	f, err := os.OpenFile(testutil.DevicePath, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return NewConn(int(f.Fd()), driverRXE)
}

func getContext(c *Conn) (vectors uint32, err error) {
	cmd := new(Cmd)
	cmd.Reset(objectDevice, methodGetContext)
	h := cmd.Out(attrNumCompVectors, 4, false)
	cmd.Out(attrCoreSupport, 8, false)
	if err := c.Invoke(cmd); err != nil {
		return 0, err
	}
	out := cmd.Output(h)
	if out == nil {
		return 0, errors.New("NUM_COMP_VECTORS not written")
	}
	return binary.NativeEndian.Uint32(out), nil
}

// rdma-facts §0.1: the driver_id must match the device.
func TestGetContextDriverID(t *testing.T) {
	c := open(t)
	wrong := NewConn(c.fd, driverMLX5)
	if _, err := getContext(wrong); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("GET_CONTEXT with driver_id MLX5 on rxe: err = %v, want EINVAL", err)
	}
	v, err := getContext(c)
	if err != nil {
		t.Fatalf("GET_CONTEXT with driver_id RXE: %v", err)
	}
	if v < 1 {
		t.Errorf("num_comp_vectors = %d, want ≥ 1", v)
	}
	// One ucontext per fd.
	if _, err := getContext(c); !errors.Is(err, unix.EINVAL) {
		t.Errorf("second GET_CONTEXT: err = %v, want EINVAL", err)
	}
}

func TestProbes(t *testing.T) {
	c := open(t)
	if _, err := getContext(c); err != nil {
		t.Fatal(err)
	}
	if !c.UsesInvokeWrite() {
		t.Error("the kernel (≥ 5.0) should take INVOKE_WRITE")
	}
	for _, tt := range []struct {
		obj, method uint16
		want        bool
	}{
		{objectDevice, methodGetContext, true},
		{objCQ, methodCQCreate, true},
		{objAsyncEvent, methodAsyncEventAlloc, true},
		{objectDevice, 0x77, false},
		{0x7ff, 0, false},
	} {
		got, err := c.Supports(tt.obj, tt.method)
		if err != nil || got != tt.want {
			t.Errorf("Supports(%d, %#x) = %v, %v; want %v", tt.obj, tt.method, got, err, tt.want)
		}
	}
}

// The legacy GET_CONTEXT through write(2) returns the async fd itself.
func TestGetContextWriteSyscall(t *testing.T) {
	c := open(t)
	cmd := new(Cmd)
	cmd.ResetWrite(cmdGetContext, false, 8, 8)
	if err := c.WriteRaw(cmd); err != nil {
		t.Fatalf("write GET_CONTEXT: %v", err)
	}
	out := cmd.CoreOut()
	asyncFD, vectors := int(int32(binary.NativeEndian.Uint32(out))), binary.NativeEndian.Uint32(out[4:])
	if asyncFD < 0 || vectors < 1 {
		t.Fatalf("resp = {async_fd %d, num_comp_vectors %d}", asyncFD, vectors)
	}
	unix.Close(asyncFD)
}

func TestAsyncEventAlloc(t *testing.T) {
	c := open(t)
	if _, err := getContext(c); err != nil {
		t.Fatal(err)
	}
	cmd := new(Cmd)
	cmd.Reset(objAsyncEvent, methodAsyncEventAlloc)
	s := cmd.FDNew(0)
	if err := c.Invoke(cmd); err != nil {
		t.Fatal(err)
	}
	fd := cmd.NewFD(s)
	if fd <= 2 {
		t.Fatalf("new async fd = %d", fd)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Errorf("the fd the kernel wrote back is not open: %v", err)
	}
	unix.Close(fd)
}

func allocPD(t *testing.T, c *Conn) uint32 {
	t.Helper()
	cmd := new(Cmd)
	cmd.ResetWrite(cmdAllocPD, false, 8, 4)
	if err := c.Invoke(cmd); err != nil {
		t.Fatalf("alloc pd: %v", err)
	}
	return binary.NativeEndian.Uint32(cmd.CoreOut())
}

// A write command with a response (ALLOC_PD), one without (DEALLOC_PD),
// and the ioctl destroy, through INVOKE_WRITE and through write(2).
func TestWriteCommands(t *testing.T) {
	for _, viaWrite := range []bool{false, true} {
		name := "INVOKE_WRITE"
		if viaWrite {
			name = "write(2)"
		}
		t.Run(name, func(t *testing.T) {
			c := open(t)
			if _, err := getContext(c); err != nil {
				t.Fatal(err)
			}
			if viaWrite {
				c.ForceWriteSyscall()
			}
			pd1, pd2 := allocPD(t, c), allocPD(t, c)
			if pd1 == pd2 {
				t.Fatalf("two PDs share handle %d", pd1)
			}
			cmd := new(Cmd)
			binary.NativeEndian.PutUint32(cmd.ResetWrite(cmdDeallocPD, false, 4, 0), pd1)
			if err := c.Invoke(cmd); err != nil {
				t.Fatalf("dealloc pd %d: %v", pd1, err)
			}
			if err := c.Invoke(cmd); err == nil {
				t.Errorf("dealloc pd %d twice succeeded", pd1)
			} else {
				t.Logf("second dealloc: %v", err)
			}
			cmd.Reset(objPD, methodPDDestroy)
			cmd.IDR(0, pd2)
			if err := c.Invoke(cmd); err != nil {
				t.Fatalf("PD_DESTROY %d: %v", pd2, err)
			}
		})
	}
}

// EX_QUERY_DEVICE, an extended command, gives the same answer both ways.
func TestExtendedCommand(t *testing.T) {
	var answers [2][]byte
	for i, viaWrite := range []bool{false, true} {
		c := open(t)
		if _, err := getContext(c); err != nil {
			t.Fatal(err)
		}
		if viaWrite {
			c.ForceWriteSyscall()
		}
		cmd := new(Cmd)
		cmd.ResetWrite(cmdQueryDevice, true, 8, 304) // ib_uverbs_ex_query_device(_resp)
		if err := c.Invoke(cmd); err != nil {
			t.Fatalf("EX_QUERY_DEVICE (write(2) %v): %v", viaWrite, err)
		}
		answers[i] = bytes.Clone(cmd.CoreOut())
	}
	maxCQE := binary.NativeEndian.Uint32(answers[0][76:]) // ib_uverbs_query_device_resp.max_cqe
	if maxCQE < 1 {
		t.Errorf("max_cqe = %d", maxCQE)
	}
	t.Logf("max_cqe = %d", maxCQE)
	if !bytes.Equal(answers[0], answers[1]) {
		t.Errorf("INVOKE_WRITE and write(2) answers differ:\n%x\n%x", answers[0], answers[1])
	}
}

// A CQ created by ioctl, armed by the REQ_NOTIFY_CQ write command without
// allocating (it sits on the data path), destroyed by ioctl.
func TestCQCreateNotifyDestroy(t *testing.T) {
	c := open(t)
	if _, err := getContext(c); err != nil {
		t.Fatal(err)
	}
	cmd := new(Cmd)
	cmd.Reset(objCQ, methodCQCreate)
	s := cmd.IDRNew(0)
	cmd.InU32(1, 10)   // CQE
	cmd.InU64(2, 1234) // USER_HANDLE
	cmd.InU32(4, 0)    // COMP_VECTOR
	cqe := cmd.Out(6, 4, true)
	mi := cmd.UHWOut(16) // struct rxe_create_cq_resp
	if err := c.Invoke(cmd); err != nil {
		t.Fatalf("CQ_CREATE: %v", err)
	}
	handle := cmd.NewHandle(s)
	if got := binary.NativeEndian.Uint32(cmd.Output(cqe)); got != 15 {
		t.Errorf("resp cqe = %d, want 15 (rxe: roundup_pow2(10+1)-1)", got)
	}
	if m := cmd.Output(mi); m == nil || binary.NativeEndian.Uint64(m) == 0 {
		t.Errorf("rxe mminfo = %x", m)
	}
	for _, viaWrite := range []bool{false, true} {
		notify := new(Cmd)
		invoke := c.Invoke
		if viaWrite {
			invoke = c.WriteRaw
		}
		arm := func() {
			req := notify.ResetWrite(cmdReqNotifyCQ, false, 8, 0)
			binary.NativeEndian.PutUint32(req, handle)
			binary.NativeEndian.PutUint32(req[4:], 0)
			if err := invoke(notify); err != nil {
				t.Fatalf("REQ_NOTIFY_CQ (write(2) %v): %v", viaWrite, err)
			}
		}
		if n := testing.AllocsPerRun(50, arm); n != 0 {
			t.Errorf("REQ_NOTIFY_CQ (write(2) %v) allocates %v times per call", viaWrite, n)
		}
	}
	cmd.Reset(objCQ, methodCQDestroy)
	cmd.IDR(0, handle)
	r := cmd.Out(1, 8, true)
	if err := c.Invoke(cmd); err != nil {
		t.Fatalf("CQ_DESTROY: %v", err)
	}
	if got := cmd.Output(r); !bytes.Equal(got, make([]byte, 8)) {
		t.Errorf("destroy resp = %x, want no events reported", got)
	}
}
