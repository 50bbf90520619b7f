package ucma

import (
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uapi"
)

// The device tests run on the VM harness's soft-RoCE device: rxe0 on a
// dummy netdev with 192.0.2.1/24, the rdma_ucm module loaded. Outside
// the VM they skip; inside it a missing /dev/infiniband/rdma_cm fails.

// rxeAddr is the harness's address on rxe0's netdev.
var rxeAddr = netip.MustParseAddr("192.0.2.1")

// eventWait bounds each wait for an event; TCG is slow, the CM is not.
const eventWait = 20 * time.Second

// openDevice opens the rdma_cm device, closing it when the test ends.
func openDevice(t *testing.T) *Conn {
	t.Helper()
	testutil.RequireDevice(t, DevicePath)
	c, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitEvent parks on the runtime's poller until c has an event: the fd
// polls readable while events are queued (ucma_poll).
func waitEvent(t *testing.T, c *Conn) Event {
	t.Helper()
	if err := c.f.SetReadDeadline(time.Now().Add(eventWait)); err != nil {
		t.Fatal(err)
	}
	var ev Event
	var gerr error
	err := c.SyscallConn().Read(func(uintptr) bool {
		ev, gerr = c.GetEvent()
		return !IsNoEvent(gerr)
	})
	if err != nil {
		t.Fatalf("waiting for an event: %v", err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return ev
}

// expect waits for an event of type typ on id and fails on any other.
func expect(t *testing.T, c *Conn, id, typ uint32) Event {
	t.Helper()
	ev := waitEvent(t, c)
	if ev.Type != typ || (id != ^uint32(0) && ev.ID != id) {
		t.Fatalf("event %d on id %d (status %d), want %d on id %d", ev.Type, ev.ID, ev.Status, typ, id)
	}
	return ev
}

// testPort is a port of its own for each test process, so that runs on
// one machine do not meet.
func testPort(n int) uint16 { return uint16(20000 + (os.Getpid()*8+n)%20000) }

func TestDeviceABIVersion(t *testing.T) {
	testutil.RequireDevice(t, DevicePath)
	v, err := ABIVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v != uapi.RDMA_USER_CM_ABI_VERSION {
		t.Errorf("ABI version %d, want %d", v, uapi.RDMA_USER_CM_ABI_VERSION)
	}
	cd, err := netlink.ClientChardev("rdma_cm")
	if err != nil {
		t.Fatalf("RDMA netlink: %v", err)
	}
	if cd.Name != "rdma_cm" || uint32(cd.ABI) != uapi.RDMA_USER_CM_ABI_VERSION || cd.Dev == 0 {
		t.Errorf("RDMA netlink's rdma_cm chardev: %+v", cd)
	}
}

// TestDeviceBindQuery binds an id to rxe0's address and finds the device
// the kernel's answers name among RDMA netlink's devices.
func TestDeviceBindQuery(t *testing.T) {
	c := openDevice(t)
	id, err := c.CreateID(1, uapi.RDMA_PS_TCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.QueryAddr(id)
	if err != nil {
		t.Fatal(err)
	}
	if a.NodeGUID != 0 || a.Dst.Family != 0 {
		t.Errorf("unbound id: %+v", a)
	}
	if err := c.Bind(id, IPSockaddr(netip.AddrPortFrom(rxeAddr, 0))); err != nil {
		t.Fatal(err)
	}
	if a, err = c.QueryAddr(id); err != nil {
		t.Fatal(err)
	}
	if a.Src.Family != AF_INET || a.Src.IP.Addr() != rxeAddr || a.Src.IP.Port() == 0 {
		t.Errorf("bound to %v, want %v and a port", a.Src, rxeAddr)
	}
	if a.NodeGUID == 0 || a.PortNum != 1 || !a.HaveIBDevIndex {
		t.Fatalf("bound id names no device: %+v", a)
	}
	devs, err := netlink.RDMADevices()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range devs {
		if d.Index == a.IBDevIndex {
			found = true
			if d.NodeGUID != a.NodeGUID {
				t.Errorf("device %s: node GUID %#x, the rdma_cm says %#x", d.Name, d.NodeGUID, a.NodeGUID)
			}
		}
	}
	if !found {
		t.Errorf("no RDMA device has index %d", a.IBDevIndex)
	}
	g, err := c.QueryGID(id)
	if err != nil {
		t.Fatal(err)
	}
	if g.Src.Family != AF_IB || g.Src.IB.GID == ([16]byte{}) {
		t.Errorf("query gid: source %v", g.Src)
	}
	if n, err := c.DestroyID(id); err != nil || n != 0 {
		t.Errorf("destroy id: %d events reported, %v", n, err)
	}
	if _, err := c.DestroyID(id); !errors.Is(err, unix.ENOENT) {
		t.Errorf("destroy id twice: %v, want ENOENT", err)
	}
}

// TestDeviceNoEvent: GET_EVENT on an empty queue is EAGAIN at once, and
// allocates nothing.
func TestDeviceNoEvent(t *testing.T) {
	c := openDevice(t)
	if _, err := c.GetEvent(); !IsNoEvent(err) {
		t.Fatalf("empty queue: %v, want EAGAIN", err)
	}
	if n := testing.AllocsPerRun(100, func() { c.GetEvent() }); n != 0 {
		t.Errorf("GetEvent: %v allocations, want 0", n)
	}
}

// TestDeviceResolve resolves rxe0's own address and route, then asks the
// kernel for the route and the QP attributes it implies.
func TestDeviceResolve(t *testing.T) {
	c := openDevice(t)
	id, err := c.CreateID(7, uapi.RDMA_PS_TCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	dst := IPSockaddr(netip.AddrPortFrom(rxeAddr, testPort(0)))
	if err := c.ResolveAddr(id, Sockaddr{}, dst, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	ev := expect(t, c, id, uapi.RDMA_CM_EVENT_ADDR_RESOLVED)
	if ev.UID != 7 || ev.Status != 0 {
		t.Errorf("addr resolved: %+v", ev)
	}
	if err := c.ResolveRoute(id, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, c, id, uapi.RDMA_CM_EVENT_ROUTE_RESOLVED)

	a, err := c.QueryAddr(id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Dst.IP != dst.IP || a.NodeGUID == 0 {
		t.Errorf("query addr after resolution: %+v", a)
	}
	paths, err := c.QueryPath(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 {
		t.Errorf("query path: %d paths, want 1 (RoCE)", len(paths))
	}
	r, err := c.QueryRoute(id)
	if err != nil {
		t.Fatal(err)
	}
	if r.NumPaths != 1 || r.NodeGUID != a.NodeGUID || r.Dst.IP != dst.IP {
		t.Errorf("query route: %+v", r)
	}
	const qpsInit = 1 // IB_QPS_INIT
	attr, mask, err := c.InitQPAttr(id, qpsInit)
	if err != nil {
		t.Fatal(err)
	}
	if attr.QPState != qpsInit || attr.PortNum != 1 || mask == 0 {
		t.Errorf("init qp attr for INIT: state %d port %d mask %#x", attr.QPState, attr.PortNum, mask)
	}
	if n, err := c.DestroyID(id); err != nil || n != 2 {
		t.Errorf("destroy id: %d events reported, %v; want 2", n, err)
	}
}

// TestDeviceUnresolvable: an address no route reaches fails at once
// with ENETUNREACH (so on 6.1 and 6.12); one the kernel starts to
// resolve and cannot ends in ADDR_ERROR.
func TestDeviceUnresolvable(t *testing.T) {
	c := openDevice(t)
	id, err := c.CreateID(1, uapi.RDMA_PS_TCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = c.ResolveAddr(id, Sockaddr{}, IPSockaddr(netip.MustParseAddrPort("198.51.100.7:1")), time.Second)
	if err != nil {
		if !errors.Is(err, unix.ENETUNREACH) {
			t.Errorf("refused at once with %v, want ENETUNREACH", err)
		}
		return
	}
	ev := expect(t, c, id, uapi.RDMA_CM_EVENT_ADDR_ERROR)
	if ev.Status >= 0 {
		t.Errorf("addr error with status %d, want a negative errno", ev.Status)
	}
}

// cmPair is a listener and a client id on two Conns, the client's route
// to the listener resolved.
func cmPair(t *testing.T, port uint16) (srv, cli *Conn, lid, cid uint32) {
	t.Helper()
	srv, cli = openDevice(t), openDevice(t)
	var err error
	if lid, err = srv.CreateID(100, uapi.RDMA_PS_TCP, 0); err != nil {
		t.Fatal(err)
	}
	if err := srv.Bind(lid, IPSockaddr(netip.AddrPortFrom(rxeAddr, port))); err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(lid, 8); err != nil {
		t.Fatal(err)
	}
	if cid, err = cli.CreateID(200, uapi.RDMA_PS_TCP, 0); err != nil {
		t.Fatal(err)
	}
	if err := cli.ResolveAddr(cid, Sockaddr{}, IPSockaddr(netip.AddrPortFrom(rxeAddr, port)), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, cli, cid, uapi.RDMA_CM_EVENT_ADDR_RESOLVED)
	if err := cli.ResolveRoute(cid, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, cli, cid, uapi.RDMA_CM_EVENT_ROUTE_RESOLVED)
	return srv, cli, lid, cid
}

// TestDeviceReject: a connection request reaches the listener as a new
// id, whose rejection reaches the client with the reason and private
// data. No QP is needed for the CM's exchange.
func TestDeviceReject(t *testing.T) {
	srv, cli, lid, cid := cmPair(t, testPort(1))
	if err := cli.Connect(cid, &ConnParam{PrivateData: []byte("hello"), QPNum: 0x1234, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}, ECE{}); err != nil {
		t.Fatal(err)
	}
	req := expect(t, srv, ^uint32(0), uapi.RDMA_CM_EVENT_CONNECT_REQUEST)
	if req.UID != 100 || req.ID == lid {
		t.Errorf("connect request: uid %d id %d, want the listener's uid and a new id", req.UID, req.ID)
	}
	if cp := req.ConnParam(); string(cp.PrivateData[:5]) != "hello" || cp.QPNum != 0x1234 {
		t.Errorf("connect request: %+v", cp)
	}
	if err := srv.Reject(req.ID, 0, []byte("go away")); err != nil {
		t.Fatal(err)
	}
	rej := expect(t, cli, cid, uapi.RDMA_CM_EVENT_REJECTED)
	if rej.Status != 28 { // IB_CM_REJ_CONSUMER_DEFINED
		t.Errorf("rejected with status %d, want 28", rej.Status)
	}
	if pd := rej.ConnParam().PrivateData; len(pd) < 7 || string(pd[:7]) != "go away" {
		t.Errorf("rejected with private data %q", pd)
	}
	if _, err := srv.DestroyID(req.ID); err != nil {
		t.Error(err)
	}
	if n, err := srv.DestroyID(lid); err != nil || n != 1 {
		t.Errorf("destroy listener: %d events reported, %v; want 1", n, err)
	}
}

// TestDeviceAccept runs the whole CM handshake without QPs: request,
// accept, CONNECT_RESPONSE, the active side's accept (RTU), ESTABLISHED,
// then both sides disconnect.
func TestDeviceAccept(t *testing.T) {
	srv, cli, _, cid := cmPair(t, testPort(2))
	if err := cli.Connect(cid, &ConnParam{QPNum: 0x1234, ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}, ECE{}); err != nil {
		t.Fatal(err)
	}
	req := expect(t, srv, ^uint32(0), uapi.RDMA_CM_EVENT_CONNECT_REQUEST)
	if err := srv.Accept(req.ID, 300, &ConnParam{PrivateData: []byte("welcome"), QPNum: 0x5678, ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7}, ECE{}); err != nil {
		t.Fatal(err)
	}
	resp := expect(t, cli, cid, uapi.RDMA_CM_EVENT_CONNECT_RESPONSE)
	if cp := resp.ConnParam(); cp.QPNum != 0x5678 || string(cp.PrivateData[:7]) != "welcome" {
		t.Errorf("connect response: %+v", cp)
	}
	if err := cli.Accept(cid, 0, nil, ECE{}); err != nil {
		t.Fatal(err)
	}
	est := expect(t, srv, req.ID, uapi.RDMA_CM_EVENT_ESTABLISHED)
	if est.UID != 300 {
		t.Errorf("established with uid %d, want the accept's 300", est.UID)
	}
	if err := cli.Disconnect(cid); err != nil {
		t.Fatal(err)
	}
	expect(t, srv, req.ID, uapi.RDMA_CM_EVENT_DISCONNECTED)
	if err := srv.Disconnect(req.ID); err != nil {
		t.Fatal(err)
	}
	expect(t, cli, cid, uapi.RDMA_CM_EVENT_DISCONNECTED)
}

// TestDeviceNoListener: a request to a port nobody listens on is
// rejected at once (status 8, IB_CM_REJ_INVALID_SERVICE_ID).
func TestDeviceNoListener(t *testing.T) {
	cli := openDevice(t)
	cid, err := cli.CreateID(1, uapi.RDMA_PS_TCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ResolveAddr(cid, Sockaddr{}, IPSockaddr(netip.AddrPortFrom(rxeAddr, testPort(3))), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, cli, cid, uapi.RDMA_CM_EVENT_ADDR_RESOLVED)
	if err := cli.ResolveRoute(cid, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, cli, cid, uapi.RDMA_CM_EVENT_ROUTE_RESOLVED)
	if err := cli.Connect(cid, &ConnParam{QPNum: 0x1234, RetryCount: 7, RNRRetryCount: 7}, ECE{}); err != nil {
		t.Fatal(err)
	}
	if ev := expect(t, cli, cid, uapi.RDMA_CM_EVENT_REJECTED); ev.Status != 8 {
		t.Errorf("rejected with status %d, want 8", ev.Status)
	}
}

// TestDeviceOptions sets each ID option on a fresh id.
func TestDeviceOptions(t *testing.T) {
	c := openDevice(t)
	id, err := c.CreateID(1, uapi.RDMA_PS_TCP, 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"tos":         c.SetTOS(id, 32),
		"reuseaddr":   c.SetReuseAddr(id, true),
		"afonly":      c.SetAFOnly(id, true),
		"ack timeout": c.SetAckTimeout(id, 14),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := c.SetOption(id, uapi.RDMA_OPTION_ID, 99, []byte{0}); !errors.Is(err, unix.ENOSYS) {
		t.Errorf("unknown option: %v, want ENOSYS", err)
	}
}

// TestDeviceMigrate moves an id between two fds: afterwards it is the
// new fd's, and the old one no longer knows it.
func TestDeviceMigrate(t *testing.T) {
	a, b := openDevice(t), openDevice(t)
	id, err := a.CreateID(1, uapi.RDMA_PS_UDP, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.MigrateID(id, a); err != nil || n != 0 {
		t.Fatalf("migrate id: %d events reported, %v", n, err)
	}
	if _, err := a.DestroyID(id); !errors.Is(err, unix.EINVAL) {
		t.Errorf("destroy on the old fd: %v, want EINVAL", err)
	}
	if _, err := b.DestroyID(id); err != nil {
		t.Errorf("destroy on the new fd: %v", err)
	}
}

// TestDeviceClose: closing the fd destroys its ids with it.
func TestDeviceClose(t *testing.T) {
	testutil.RequireDevice(t, DevicePath)
	testutil.CheckFDLeak(t)
	c, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := c.CreateID(1, uapi.RDMA_PS_TCP, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateID(1, uapi.RDMA_PS_TCP, 0); err == nil {
		t.Error("create id after close succeeded")
	}
}
