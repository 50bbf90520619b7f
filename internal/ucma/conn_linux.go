package ucma

import (
	"errors"
	"math"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/uapi"
)

// Conn is one open rdma_cm fd, the kernel's event channel: the ids made
// on it, and the events they report, are its own, and closing it destroys
// them. It owns the fd (O_RDWR|O_CLOEXEC|O_NONBLOCK), held by an
// *os.File that the runtime's poller watches, so that a caller can wait
// for events with [Conn.SyscallConn] without blocking a thread.
//
// A Conn is safe for concurrent use: every command takes a reference on
// the fd for the length of its write, so Close never frees the number
// under a command. GetEvent calls are serialised.
type Conn struct {
	f      *os.File
	rc     syscall.RawConn
	closed atomic.Bool

	// kernel, when a test sets it, answers the commands in place of the
	// char device, as the kernel would: reading the request, writing the
	// response.
	kernel func(c *cmd) unix.Errno

	evMu  sync.Mutex       // one GET_EVENT at a time; guards the fields below
	ev    *cmd             // GET_EVENT, built once: its request never changes
	evFn  func(fd uintptr) // = c.getEventFD, bound once so GetEvent allocates nothing
	evErr unix.Errno       // getEventFD's answer
}

// Open opens the rdma_cm device, as librdmacm's
// rdma_create_event_channel does. It fails if the rdma_ucm module is not
// loaded (ENOENT).
func Open() (*Conn, error) {
	fd, err := unix.Open(DevicePath, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &errs.OpError{Op: "open", Device: device, Err: err}
	}
	c, err := newConn(os.NewFile(uintptr(fd), DevicePath), nil)
	if err != nil {
		return nil, &errs.OpError{Op: "open", Device: device, Err: err}
	}
	return c, nil
}

// newConn makes a Conn of f, an open non-blocking fd; kernel, if not
// nil, answers its commands (tests).
func newConn(f *os.File, kernel func(*cmd) unix.Errno) (*Conn, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	c := &Conn{f: f, rc: rc, kernel: kernel, ev: newCmd()}
	c.ev.getEvent()
	c.evFn = c.getEventFD
	return c, nil
}

// Close closes the fd, which destroys every id still on it and drops
// their events (the kernel's ucma_close). A second Close returns an
// *OpError wrapping ErrClosed, as does every command after the first.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return &errs.OpError{Op: "close", Device: device, Err: errs.ErrClosed}
	}
	if err := c.f.Close(); err != nil {
		return &errs.OpError{Op: "close", Device: device, Err: err}
	}
	return nil
}

// SyscallConn returns the fd's raw connection, to wait on the runtime's
// poller for events (its Read parks until the fd polls readable, which it
// does while events are queued): call GetEvent from the Read callback and
// return false on EAGAIN. Never take the fd out of it to keep: it stays
// the Conn's.
func (c *Conn) SyscallConn() syscall.RawConn { return c.rc }

// File returns the fd's *os.File, for a waiter that needs its read
// deadline (fdturn.Reader: a deadline in the past wakes a parked wait).
// It stays the Conn's: never close it, nor take its fd to keep.
func (c *Conn) File() *os.File { return c.f }

// write sends cm on fd, or to the test's kernel.
func (c *Conn) write(fd uintptr, cm *cmd) unix.Errno { return c.writeVia(fd, cm, false) }

// writeVia is write, through RawSyscall if raw (for a command that
// returns at once).
func (c *Conn) writeVia(fd uintptr, cm *cmd, raw bool) unix.Errno {
	if c.kernel != nil {
		return c.kernel(cm)
	}
	req := cm.request()
	var (
		n uintptr
		e syscall.Errno
	)
	if raw {
		n, _, e = syscall.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(req))), uintptr(len(req)))
	} else {
		// Syscall, not RawSyscall, for the rest: DESTROY_ID waits for
		// the CM, and RESOLVE_* and CONNECT send packets.
		n, _, e = syscall.Syscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(req))), uintptr(len(req)))
	}
	runtime.KeepAlive(cm) // the kernel wrote to its response memory until here
	if e != 0 {
		return e
	}
	if int(n) != len(req) {
		return unix.EIO // the kernel answers a whole write or an error
	}
	return 0
}

// do sends cm on the Conn's fd, holding a reference on it meanwhile.
func (c *Conn) do(op string, cm *cmd) error {
	cm.via, cm.errno = c, 0
	err := c.rc.Control(cm.write)
	e := cm.errno
	cm.via = nil
	if err != nil {
		return c.fdErr(op, err)
	}
	if e != 0 {
		return &errs.OpError{Op: op, Device: device, Err: e}
	}
	return nil
}

// send sends cm, which the caller built: buildErr is the building's
// error, the caller's input making the command impossible, and then
// nothing is sent.
func (c *Conn) send(op string, cm *cmd, buildErr error) error {
	if buildErr != nil {
		return inputErr(op, buildErr)
	}
	return c.do(op, cm)
}

// call sends cm as send does and returns its response as parse reads
// it.
func call[T any](c *Conn, op string, cm *cmd, buildErr error, parse func([]byte) (T, error)) (T, error) {
	var v T
	if err := c.send(op, cm, buildErr); err != nil {
		return v, err
	}
	v, err := parse(cm.response())
	if err != nil {
		var zero T
		return zero, parseErr(op, err)
	}
	return v, nil
}

// callU32 is call for a response that is one __u32.
func (c *Conn) callU32(op string, cm *cmd, buildErr error) (uint32, error) {
	if err := c.send(op, cm, buildErr); err != nil {
		return 0, err
	}
	return responseU32(op, cm)
}

// responseU32 reads cm's response, one __u32.
func responseU32(op string, cm *cmd) (uint32, error) {
	n, err := parseU32(op, cm.response())
	if err != nil {
		return 0, parseErr(op, err)
	}
	return n, nil
}

// fdErr is the error of a command whose fd could not be had: ErrClosed
// after Close (the runtime's own says "use of closed file").
func (c *Conn) fdErr(op string, err error) error {
	if c.closed.Load() {
		err = errs.ErrClosed
	}
	return &errs.OpError{Op: op, Device: device, Err: err}
}

// cmds recycles the commands of the control path.
var cmds = sync.Pool{New: func() any { return newCmd() }}

// newCmd is a cmd with its write function.
func newCmd() *cmd {
	cm := new(cmd)
	cm.write = cm.writeTo
	return cm
}

// writeTo writes the cmd on fd, the fd of its Conn via (Conn.do).
func (cm *cmd) writeTo(fd uintptr) { cm.errno = cm.via.write(fd, cm) }

func getCmd() *cmd   { return cmds.Get().(*cmd) }
func putCmd(cm *cmd) { cmds.Put(cm) }

// inputErr is the error of a command the caller's input made impossible
// to build: nothing reached the kernel.
func inputErr(op string, err error) error {
	return &errs.OpError{Op: op, Device: device, Err: err}
}

// parseErr is the error of a response that did not parse.
func parseErr(op string, err error) error {
	return &errs.OpError{Op: op, Device: device, Err: err}
}

// milliseconds converts a timeout for the kernel, which takes whole
// milliseconds as an int: rounded up, at least 0, at most MaxInt32.
func milliseconds(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return uint32(min(ms, math.MaxInt32))
}

// CreateID creates an id in port space ps (uapi.RDMA_PS_*) and returns
// the kernel's number for it; uid is the caller's, echoed in the id's
// events (0 makes the kernel drop them: give every id a nonzero one).
// qpType (enum ib_qp_type) counts only in RDMA_PS_IB: TCP is RC, UDP and
// IPOIB UD. librdmacm: rdma_create_id.
func (c *Conn) CreateID(uid uint64, ps uint16, qpType uint8) (uint32, error) {
	const op = "create id"
	cm := getCmd()
	defer putCmd(cm)
	cm.createID(uid, ps, qpType)
	return c.callU32(op, cm, nil)
}

// DestroyID destroys an id, with the connection requests it got and did
// not report, and returns how many events the kernel reported for it: a
// caller must not free the id's state before it has handled as many.
// librdmacm: rdma_destroy_id.
func (c *Conn) DestroyID(id uint32) (eventsReported uint32, err error) {
	const op = "destroy id"
	cm := getCmd()
	defer putCmd(cm)
	cm.destroyID(id)
	return c.callU32(op, cm, nil)
}

// BindIP binds an id to an IP address and port (BIND_IP, whose address
// is at most a sockaddr_in6: no AF_IB). librdmacm uses it where the
// kernel lacks AF_IB support.
func (c *Conn) BindIP(id uint32, addr netip.AddrPort) error {
	const op = "bind ip"
	cm := getCmd()
	defer putCmd(cm)
	return c.send(op, cm, cm.bindIP(id, addr))
}

// Bind binds an id to any address the kernel takes: AF_INET, AF_INET6
// or AF_IB. librdmacm: rdma_bind_addr.
func (c *Conn) Bind(id uint32, addr Sockaddr) error {
	const op = "bind"
	cm := getCmd()
	defer putCmd(cm)
	return c.send(op, cm, cm.bind(id, addr))
}

// ResolveIP starts resolving dst (and binding to src, if valid) to an
// RDMA device: RESOLVE_IP, IP addresses only. It ends with an
// ADDR_RESOLVED or ADDR_ERROR event.
func (c *Conn) ResolveIP(id uint32, src, dst netip.AddrPort, timeout time.Duration) error {
	const op = "resolve ip"
	cm := getCmd()
	defer putCmd(cm)
	return c.send(op, cm, cm.resolveIP(id, src, dst, milliseconds(timeout)))
}

// ResolveAddr starts resolving dst (src is optional: the zero Sockaddr)
// to an RDMA device, any family. It ends with an ADDR_RESOLVED or
// ADDR_ERROR event. librdmacm: rdma_resolve_addr.
func (c *Conn) ResolveAddr(id uint32, src, dst Sockaddr, timeout time.Duration) error {
	const op = "resolve addr"
	cm := getCmd()
	defer putCmd(cm)
	return c.send(op, cm, cm.resolveAddr(id, src, dst, milliseconds(timeout)))
}

// ResolveRoute starts resolving the route to the resolved address. It
// ends with a ROUTE_RESOLVED or ROUTE_ERROR event. librdmacm:
// rdma_resolve_route.
func (c *Conn) ResolveRoute(id uint32, timeout time.Duration) error {
	const op = "resolve route"
	cm := getCmd()
	defer putCmd(cm)
	cm.resolveRoute(id, milliseconds(timeout))
	return c.do(op, cm)
}

// QueryAddr returns the id's addresses and the device, port and P_Key it
// is bound to (QUERY, RDMA_USER_CM_QUERY_ADDR).
func (c *Conn) QueryAddr(id uint32) (AddrInfo, error) {
	return c.queryAddr("query addr", id, uapi.RDMA_USER_CM_QUERY_ADDR)
}

// QueryGID returns the id's source and destination GIDs, as AF_IB
// addresses with the P_Key and service id (QUERY, RDMA_USER_CM_QUERY_GID).
func (c *Conn) QueryGID(id uint32) (AddrInfo, error) {
	return c.queryAddr("query gid", id, uapi.RDMA_USER_CM_QUERY_GID)
}

func (c *Conn) queryAddr(op string, id, option uint32) (AddrInfo, error) {
	cm := getCmd()
	defer putCmd(cm)
	cm.query(id, option, sizeofAddrResp)
	return call(c, op, cm, nil, parseAddrResp)
}

// QueryPath returns the id's resolved path records (QUERY,
// RDMA_USER_CM_QUERY_PATH): none before its route is resolved.
func (c *Conn) QueryPath(id uint32) ([]PathData, error) {
	const op = "query path"
	cm := getCmd()
	defer putCmd(cm)
	cm.query(id, uapi.RDMA_USER_CM_QUERY_PATH, sizeofPathResp)
	return call(c, op, cm, nil, parsePaths)
}

// QueryRoute returns the id's route in one answer (QUERY_ROUTE): what
// librdmacm asks of kernels without AF_IB support, in place of QUERY.
// Its addresses are IP ones only.
func (c *Conn) QueryRoute(id uint32) (Route, error) {
	const op = "query route"
	cm := getCmd()
	defer putCmd(cm)
	cm.queryRoute(id)
	return call(c, op, cm, nil, parseRoute)
}

// Connect sends a connection request on an id whose route is resolved
// (p is required; its QPNum is the local QP). It ends with
// CONNECT_RESPONSE (the caller then moves the QP to RTR and RTS and
// calls Accept with p nil), ESTABLISHED, REJECTED, UNREACHABLE or
// CONNECT_ERROR. librdmacm: rdma_connect.
func (c *Conn) Connect(id uint32, p *ConnParam, ece ECE) error {
	const op = "connect"
	cm := getCmd()
	defer putCmd(cm)
	return c.send(op, cm, cm.connect(id, p, ece))
}

// Listen makes a bound id listen for connection requests, at most
// backlog of them unreported (0, or more than the sysctl
// net/rdma_ucm/max_backlog: that maximum). librdmacm: rdma_listen.
func (c *Conn) Listen(id uint32, backlog int) error {
	const op = "listen"
	cm := getCmd()
	defer putCmd(cm)
	cm.listen(id, uint32(min(max(backlog, 0), math.MaxInt32)))
	return c.do(op, cm)
}

// Accept accepts the connection request that made id (passive side,
// with p: its QPNum is the local QP, moved to RTS by then), setting the
// id's uid; or, with p nil, ends the active side's connection setup
// after CONNECT_RESPONSE. librdmacm: rdma_accept, and rdma_establish.
func (c *Conn) Accept(id uint32, uid uint64, p *ConnParam, ece ECE) error {
	const op = "accept"
	cm := getCmd()
	defer putCmd(cm)
	return c.send(op, cm, cm.accept(id, uid, p, ece))
}

// Reject rejects the connection request that made id, with private data
// for the peer's REJECTED event. reason is the CM's reject reason: 0 (the
// consumer's own, IB_CM_REJ_CONSUMER_DEFINED) or 35 (vendor option not
// supported); the kernel refuses others. librdmacm: rdma_reject.
func (c *Conn) Reject(id uint32, reason uint8, private []byte) error {
	const op = "reject"
	cm := getCmd()
	defer putCmd(cm)
	return c.send(op, cm, cm.reject(id, reason, private))
}

// Disconnect starts tearing down the id's connection; DISCONNECTED
// follows (rdmacm-facts.md: on rxe, only once the peer disconnects too
// or the CM gives up). librdmacm: rdma_disconnect.
func (c *Conn) Disconnect(id uint32) error {
	const op = "disconnect"
	cm := getCmd()
	defer putCmd(cm)
	cm.disconnect(id)
	return c.do(op, cm)
}

// InitQPAttr returns the attributes, and the mask of them, that move
// the id's QP to state (enum ib_qp_state: INIT, RTR or RTS): modify QP
// must take them as they are. mask is attr.QPAttrMask. librdmacm:
// rdma_init_qp_attr.
func (c *Conn) InitQPAttr(id, state uint32) (attr uapi.IBUverbsQPAttr, mask uint32, err error) {
	const op = "init qp attr"
	cm := getCmd()
	defer putCmd(cm)
	cm.initQPAttr(id, state)
	if attr, err = call(c, op, cm, nil, parseQPAttr); err != nil {
		return attr, 0, err
	}
	return attr, attr.QPAttrMask, nil
}

// errNoEvent is GetEvent's error when no event is queued: built once,
// since a waiter meets it on every wakeup that finds the queue empty.
var errNoEvent error = &errs.OpError{Op: "get event", Device: device, Err: unix.EAGAIN}

// GetEvent takes the next event off the fd's queue without blocking: an
// error wrapping EAGAIN says none is queued. A CONNECT_REQUEST's id is
// new, the kernel's, and the caller's to accept, reject or destroy.
// After warm-up it allocates nothing. librdmacm: rdma_get_cm_event.
func (c *Conn) GetEvent() (Event, error) {
	c.evMu.Lock()
	defer c.evMu.Unlock()
	c.evErr = 0
	if err := c.rc.Control(c.evFn); err != nil {
		return Event{}, c.fdErr("get event", err)
	}
	switch c.evErr {
	case 0:
	case unix.EAGAIN:
		return Event{}, errNoEvent
	default:
		return Event{}, &errs.OpError{Op: "get event", Device: device, Err: c.evErr}
	}
	ev, err := parseEvent(c.ev.response())
	if err != nil {
		return Event{}, parseErr("get event", err)
	}
	return ev, nil
}

// getEventFD writes the GET_EVENT command; GetEvent holds evMu. The fd
// is non-blocking, so GET_EVENT returns at once, with an event or
// EAGAIN: RawSyscall, since a Syscall's scheduler entry would wake the
// runtime's sysmon thread each time the channel's reader comes back
// from the poller to an idle process (two thread switches an event).
func (c *Conn) getEventFD(fd uintptr) { c.evErr = c.writeVia(fd, c.ev, true) }

// SetOption sets an id's option: level uapi.RDMA_OPTION_ID or
// RDMA_OPTION_IB, name RDMA_OPTION_ID_* or RDMA_OPTION_IB_PATH, val its
// value as the kernel reads it. The typed helpers below spell the usual
// ones. librdmacm: rdma_set_option.
func (c *Conn) SetOption(id, level, name uint32, val []byte) error {
	const op = "set option"
	cm := getCmd()
	defer putCmd(cm)
	return c.send(op, cm, cm.setOption(id, level, name, val))
}

// SetTOS sets the id's type of service (RDMA_OPTION_ID_TOS), before it
// resolves its route.
func (c *Conn) SetTOS(id uint32, tos uint8) error {
	return c.SetOption(id, uapi.RDMA_OPTION_ID, uapi.RDMA_OPTION_ID_TOS, []byte{tos})
}

// SetReuseAddr lets the id bind an address and port in use
// (RDMA_OPTION_ID_REUSEADDR), before it binds.
func (c *Conn) SetReuseAddr(id uint32, on bool) error {
	return c.SetOption(id, uapi.RDMA_OPTION_ID, uapi.RDMA_OPTION_ID_REUSEADDR, boolOption(on))
}

// SetAFOnly makes an id bound to an IPv6 wildcard take IPv6 only
// (RDMA_OPTION_ID_AFONLY), before it binds.
func (c *Conn) SetAFOnly(id uint32, on bool) error {
	return c.SetOption(id, uapi.RDMA_OPTION_ID, uapi.RDMA_OPTION_ID_AFONLY, boolOption(on))
}

// SetAckTimeout sets the QP's local ACK timeout the CM will give
// (RDMA_OPTION_ID_ACK_TIMEOUT: 4.096 µs × 2^timeout; kernel ≥ 5.3).
func (c *Conn) SetAckTimeout(id uint32, timeout uint8) error {
	return c.SetOption(id, uapi.RDMA_OPTION_ID, uapi.RDMA_OPTION_ID_ACK_TIMEOUT, []byte{timeout})
}

// boolOption is an int option's value, as the kernel reads it.
func boolOption(on bool) []byte {
	var b [4]byte
	if on {
		ne.PutUint32(b[:], 1)
	}
	return b[:]
}

// Notify passes an async event of the id's QP to the CM (enum
// ib_event_type; IB_EVENT_COMM_EST is the one that matters: data
// arrived before ESTABLISHED). librdmacm: rdma_notify.
func (c *Conn) Notify(id, event uint32) error {
	const op = "notify"
	cm := getCmd()
	defer putCmd(cm)
	cm.notify(id, event)
	return c.do(op, cm)
}

// MigrateID moves an id from the Conn from to this one, with its queued
// events, and returns how many events from had reported for it.
// librdmacm: rdma_migrate_id.
func (c *Conn) MigrateID(id uint32, from *Conn) (eventsReported uint32, err error) {
	const op = "migrate id"
	cm := getCmd()
	defer putCmd(cm)
	var inner error
	// Both fds are held for the write: the kernel looks from's up by
	// number (from may be c itself).
	cm.via, cm.errno = c, 0
	outer := from.rc.Control(func(fromFD uintptr) {
		cm.migrateID(id, int(fromFD))
		inner = c.rc.Control(cm.write)
	})
	e := cm.errno
	cm.via = nil
	switch {
	case outer != nil:
		return 0, from.fdErr(op, outer)
	case inner != nil:
		return 0, c.fdErr(op, inner)
	case e != 0:
		return 0, &errs.OpError{Op: op, Device: device, Err: e}
	}
	return responseU32(op, cm)
}

// JoinMcast joins the id to a multicast group (join flags
// uapi.RDMA_MC_JOIN_FLAG_*) and returns the join's id, whose events
// (MULTICAST_JOIN, MULTICAST_ERROR) carry uid. librdmacm:
// rdma_join_multicast_ex.
func (c *Conn) JoinMcast(id uint32, uid uint64, addr Sockaddr, flags uint16) (uint32, error) {
	const op = "join mcast"
	cm := getCmd()
	defer putCmd(cm)
	return c.callU32(op, cm, cm.joinMcast(id, uid, addr, flags))
}

// LeaveMcast leaves the group a JoinMcast joined and returns how many
// events the join reported. librdmacm: rdma_leave_multicast.
func (c *Conn) LeaveMcast(mcID uint32) (eventsReported uint32, err error) {
	const op = "leave mcast"
	cm := getCmd()
	defer putCmd(cm)
	cm.leaveMcast(mcID)
	return c.callU32(op, cm, nil)
}

// IsNoEvent reports whether err is GetEvent's "no event queued".
func IsNoEvent(err error) bool { return err == errNoEvent || errors.Is(err, unix.EAGAIN) }
