package ucma

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/uapi"
)

// fakeKernel answers a Conn's commands in place of the rdma_cm device,
// as ucma.c does: it checks the header against the request, finds the
// response address where the command keeps it, and writes the answer
// there. answers gives, per command, the errno and the response bytes.
type fakeKernel struct {
	t       *testing.T
	calls   []uint32          // command numbers, in order
	bodies  map[uint32][]byte // the last body of each command
	answers map[uint32]func(body []byte) (unix.Errno, []byte)
}

// respOffset is where each command's body holds the response address.
var respOffset = map[uint32]int{
	uapi.RDMA_USER_CM_CMD_CREATE_ID:    8,
	uapi.RDMA_USER_CM_CMD_DESTROY_ID:   0,
	uapi.RDMA_USER_CM_CMD_QUERY:        0,
	uapi.RDMA_USER_CM_CMD_QUERY_ROUTE:  0,
	uapi.RDMA_USER_CM_CMD_INIT_QP_ATTR: 0,
	uapi.RDMA_USER_CM_CMD_GET_EVENT:    0,
	uapi.RDMA_USER_CM_CMD_MIGRATE_ID:   0,
	uapi.RDMA_USER_CM_CMD_JOIN_MCAST:   0,
	uapi.RDMA_USER_CM_CMD_LEAVE_MCAST:  0,
}

func (k *fakeKernel) serve(cm *cmd) unix.Errno {
	req := cm.request()
	op, in, out := ne.Uint32(req), int(ne.Uint16(req[4:])), int(ne.Uint16(req[6:]))
	if in != len(req)-hdrSize {
		k.t.Errorf("command %d: in = %d, body of %d bytes", op, in, len(req)-hdrSize)
	}
	body := req[hdrSize:]
	k.calls = append(k.calls, op)
	if k.bodies == nil {
		k.bodies = map[uint32][]byte{}
	}
	k.bodies[op] = append(k.bodies[op][:0], body...) // reused: GetEvent's allocation test runs through here
	var resp []byte
	if out > 0 {
		off, ok := respOffset[op]
		if !ok {
			k.t.Fatalf("command %d has out %d but no response field", op, out)
		}
		want := cm.responsePointer()
		if !bytes.Equal(body[off:off+8], unsafe.Slice((*byte)(unsafe.Pointer(&want)), 8)) {
			k.t.Fatalf("command %d: response field %x is not the command's response memory", op, body[off:off+8])
		}
		resp = cm.response()
	}
	answer := k.answers[op]
	if answer == nil {
		return 0
	}
	e, b := answer(body)
	if e == 0 && len(b) > 0 {
		if len(b) > out {
			k.t.Fatalf("command %d: answer of %d bytes, room for %d", op, len(b), out)
		}
		copy(resp, b)
	}
	return e
}

// fakeConn is a Conn on a pipe's fd whose commands k answers.
func fakeConn(t *testing.T, k *fakeKernel) *Conn {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	k.t = t
	c, err := newConn(w, k.serve)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func answerU32(v uint32) func([]byte) (unix.Errno, []byte) {
	return func([]byte) (unix.Errno, []byte) { return 0, ne.AppendUint32(nil, v) }
}

// TestConnCommands runs every command through the fake kernel: the
// command number, the body reaching the kernel, the answer decoded.
func TestConnCommands(t *testing.T) {
	qpAttr := put(make([]byte, 144), u32(0, 0x21), u32(4, 1))
	k := &fakeKernel{answers: map[uint32]func([]byte) (unix.Errno, []byte){
		uapi.RDMA_USER_CM_CMD_CREATE_ID:   answerU32(7),
		uapi.RDMA_USER_CM_CMD_DESTROY_ID:  answerU32(3),
		uapi.RDMA_USER_CM_CMD_MIGRATE_ID:  answerU32(5),
		uapi.RDMA_USER_CM_CMD_JOIN_MCAST:  answerU32(11),
		uapi.RDMA_USER_CM_CMD_LEAVE_MCAST: answerU32(2),
		uapi.RDMA_USER_CM_CMD_INIT_QP_ATTR: func([]byte) (unix.Errno, []byte) {
			return 0, qpAttr
		},
		uapi.RDMA_USER_CM_CMD_QUERY: func(body []byte) (unix.Errno, []byte) {
			switch ne.Uint32(body[12:]) {
			case uapi.RDMA_USER_CM_QUERY_PATH:
				return 0, put(make([]byte, 80), u32(0, 1), u32(8, 0x29))
			default:
				return 0, put(make([]byte, 280), be64(0, 0xabcd), u8(8, 1), u16(12, 16), sin(16, "192.0.2.1:7471"), u32(272, 0))
			}
		},
		uapi.RDMA_USER_CM_CMD_QUERY_ROUTE: func([]byte) (unix.Errno, []byte) {
			return 0, put(make([]byte, 208), u32(192, 1), u32(200, 4))
		},
	}}
	c := fakeConn(t, k)
	v4 := netip.MustParseAddrPort("192.0.2.1:7471")
	check := func(name string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	id, err := c.CreateID(0x55, uapi.RDMA_PS_TCP, 0)
	check("create id", err)
	if id != 7 {
		t.Errorf("create id = %d, want 7", id)
	}
	check("bind ip", c.BindIP(id, v4))
	check("bind", c.Bind(id, IPSockaddr(v4)))
	check("resolve ip", c.ResolveIP(id, netip.AddrPort{}, v4, time.Second))
	check("resolve addr", c.ResolveAddr(id, Sockaddr{}, IPSockaddr(v4), 1500*time.Microsecond))
	if got := ne.Uint32(k.bodies[uapi.RDMA_USER_CM_CMD_RESOLVE_ADDR][4:]); got != 2 {
		t.Errorf("resolve addr: timeout %d ms for 1.5 ms, want 2 (rounded up)", got)
	}
	check("resolve route", c.ResolveRoute(id, time.Second))
	a, err := c.QueryAddr(id)
	check("query addr", err)
	if a.NodeGUID != 0xabcd || a.Src.IP != v4 || !a.HaveIBDevIndex {
		t.Errorf("query addr = %+v", a)
	}
	_, err = c.QueryGID(id)
	check("query gid", err)
	p, err := c.QueryPath(id)
	check("query path", err)
	if len(p) != 1 || p[0].Flags != 0x29 {
		t.Errorf("query path = %+v", p)
	}
	r, err := c.QueryRoute(id)
	check("query route", err)
	if r.NumPaths != 1 || r.IBDevIndex != 4 {
		t.Errorf("query route = %+v", r)
	}
	check("connect", c.Connect(id, &ConnParam{QPNum: 0x99, RNRRetryCount: 7}, ECE{}))
	check("listen", c.Listen(id, -1))
	if got := ne.Uint32(k.bodies[uapi.RDMA_USER_CM_CMD_LISTEN][4:]); got != 0 {
		t.Errorf("listen: backlog %d for -1, want 0 (the kernel's maximum)", got)
	}
	check("accept", c.Accept(id, 0x56, &ConnParam{QPNum: 0x99}, ECE{}))
	check("reject", c.Reject(id, 0, []byte("no")))
	check("disconnect", c.Disconnect(id))
	attr, mask, err := c.InitQPAttr(id, 1)
	check("init qp attr", err)
	if mask != 0x21 || attr.QPState != 1 {
		t.Errorf("init qp attr = %+v, mask %#x", attr, mask)
	}
	check("tos", c.SetTOS(id, 32))
	check("reuseaddr", c.SetReuseAddr(id, true))
	if got := k.bodies[uapi.RDMA_USER_CM_CMD_SET_OPTION]; ne.Uint32(got[16:]) != uapi.RDMA_OPTION_ID_REUSEADDR || ne.Uint32(got[20:]) != 4 {
		t.Errorf("reuseaddr: body %x", got)
	}
	check("afonly", c.SetAFOnly(id, false))
	check("ack timeout", c.SetAckTimeout(id, 14))
	check("notify", c.Notify(id, 9))
	mc, err := c.JoinMcast(id, 0x57, IPSockaddr(netip.MustParseAddrPort("239.0.0.1:0")), uapi.RDMA_MC_JOIN_FLAG_FULLMEMBER)
	check("join mcast", err)
	if mc != 11 {
		t.Errorf("join mcast = %d, want 11", mc)
	}
	n, err := c.LeaveMcast(mc)
	check("leave mcast", err)
	if n != 2 {
		t.Errorf("leave mcast = %d, want 2", n)
	}

	other := fakeConn(t, &fakeKernel{})
	var otherFD uintptr
	other.rc.Control(func(fd uintptr) { otherFD = fd })
	n, err = c.MigrateID(id, other)
	check("migrate id", err)
	if n != 5 {
		t.Errorf("migrate id = %d, want 5", n)
	}
	if got := ne.Uint32(k.bodies[uapi.RDMA_USER_CM_CMD_MIGRATE_ID][12:]); uintptr(got) != otherFD {
		t.Errorf("migrate id: fd %d, want the other Conn's %d", got, otherFD)
	}
	n, err = c.DestroyID(id)
	check("destroy id", err)
	if n != 3 {
		t.Errorf("destroy id = %d, want 3", n)
	}

	want := []uint32{0, 2, 20, 3, 21, 4, 19, 19, 19, 5, 6, 7, 8, 9, 10, 11, 14, 14, 14, 14, 15, 22, 17, 18, 1}
	if !slicesEqual(k.calls, want) {
		t.Errorf("commands %v, want %v", k.calls, want)
	}
}

func slicesEqual(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestConnErrors checks that a refused command names itself and keeps
// the errno, and that input the command cannot carry never reaches the
// kernel.
func TestConnErrors(t *testing.T) {
	k := &fakeKernel{answers: map[uint32]func([]byte) (unix.Errno, []byte){
		uapi.RDMA_USER_CM_CMD_RESOLVE_ADDR: func([]byte) (unix.Errno, []byte) { return unix.ENODEV, nil },
	}}
	c := fakeConn(t, k)
	err := c.ResolveAddr(1, Sockaddr{}, IPSockaddr(netip.MustParseAddrPort("192.0.2.9:1")), time.Second)
	var op *errs.OpError
	if !errors.As(err, &op) || op.Op != "resolve addr" || !errors.Is(err, unix.ENODEV) {
		t.Errorf("error %v, want resolve addr's ENODEV", err)
	}
	if got, want := err.Error(), "resolve addr rdma_cm: no such device"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	calls := len(k.calls)
	if err := c.Reject(1, 0, make([]byte, 300)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("reject with 300 bytes: %v, want EINVAL", err)
	}
	if len(k.calls) != calls {
		t.Error("a command the caller's input spoilt reached the kernel")
	}
}

// TestConnClose checks Close's contract: once, and after it every
// command is ErrClosed without reaching the kernel.
func TestConnClose(t *testing.T) {
	k := &fakeKernel{}
	c := fakeConn(t, k)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); !errors.Is(err, errs.ErrClosed) {
		t.Errorf("second close: %v, want ErrClosed", err)
	}
	if _, err := c.CreateID(1, uapi.RDMA_PS_TCP, 0); !errors.Is(err, errs.ErrClosed) {
		t.Errorf("create id after close: %v, want ErrClosed", err)
	}
	if _, err := c.GetEvent(); !errors.Is(err, errs.ErrClosed) || IsNoEvent(err) {
		t.Errorf("get event after close: %v, want ErrClosed", err)
	}
	if len(k.calls) != 0 {
		t.Errorf("commands reached the kernel after close: %v", k.calls)
	}
}

// TestGetEvent takes queued events off the fake kernel's queue, then
// meets EAGAIN; and neither allocates once warm.
func TestGetEvent(t *testing.T) {
	var queue [][]byte
	k := &fakeKernel{answers: map[uint32]func([]byte) (unix.Errno, []byte){
		uapi.RDMA_USER_CM_CMD_GET_EVENT: func([]byte) (unix.Errno, []byte) {
			if len(queue) == 0 {
				return unix.EAGAIN, nil
			}
			b := queue[0]
			queue = queue[1:]
			return 0, b
		},
	}}
	c := fakeConn(t, k)
	ev := put(make([]byte, 336), u64(0, 9), u32(8, 4), u32(12, uapi.RDMA_CM_EVENT_ESTABLISHED), u8(284, 3), raw(28, []byte("abc")))
	queue = append(queue, ev)
	e, err := c.GetEvent()
	if err != nil {
		t.Fatal(err)
	}
	if e.UID != 9 || e.ID != 4 || e.Type != uapi.RDMA_CM_EVENT_ESTABLISHED || string(e.ConnParam().PrivateData) != "abc" {
		t.Errorf("event %+v", e)
	}
	if _, err := c.GetEvent(); !IsNoEvent(err) || !errors.Is(err, unix.EAGAIN) {
		t.Errorf("empty queue: %v, want EAGAIN", err)
	}

	// No allocation after warm-up, whether an event is queued or not
	// (the fake kernel allocates nothing either once its slices are grown).
	k.calls = make([]uint32, 0, 1)
	k.answers[uapi.RDMA_USER_CM_CMD_GET_EVENT] = func([]byte) (unix.Errno, []byte) { return 0, ev }
	if n := testing.AllocsPerRun(100, func() {
		k.calls = k.calls[:0]
		if _, err := c.GetEvent(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("GetEvent with an event: %v allocations, want 0", n)
	}
	k.answers[uapi.RDMA_USER_CM_CMD_GET_EVENT] = func([]byte) (unix.Errno, []byte) { return unix.EAGAIN, nil }
	if n := testing.AllocsPerRun(100, func() {
		k.calls = k.calls[:0]
		if _, err := c.GetEvent(); !IsNoEvent(err) {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("GetEvent with none queued: %v allocations, want 0", n)
	}
}

// TestParseEventAllocs: decoding an event and both views of its
// parameters allocate nothing.
func TestParseEventAllocs(t *testing.T) {
	b := put(make([]byte, 336), u32(12, uapi.RDMA_CM_EVENT_CONNECT_REQUEST), u8(284, 56), u8(316, 9))
	var sink int
	if n := testing.AllocsPerRun(100, func() {
		ev, err := parseEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		cp := ev.ConnParam()
		ud := ev.UDParam()
		sink += len(cp.PrivateData) + len(ud.PrivateData)
	}); n != 0 {
		t.Errorf("parseEvent: %v allocations, want 0", n)
	}
	_ = sink
}
