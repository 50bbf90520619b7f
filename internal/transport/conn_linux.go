package transport

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Conn issues commands on one open uverbs fd. It does not own the fd: the
// caller closes it after the last command. A Conn is safe for concurrent
// use; each call needs its own Cmd.
type Conn struct {
	fd       int
	driverID uint32

	// invokeWrite caches whether the kernel takes write commands through
	// UVERBS_METHOD_INVOKE_WRITE: 0 not probed yet, 1 yes, 2 no.
	invokeWrite atomic.Int32

	// kernel, when set, answers in place of the char device: a device
	// model in tests. Nil means the real kernel.
	kernel Kernel

	mu     sync.RWMutex
	probes map[uint32]bool // guarded by mu: object<<16|method -> supported
	hidden map[uint32]bool // guarded by mu: methods Hide pretends are missing
	hides  atomic.Bool     // any hidden: checked before taking mu
}

// Hide makes the Conn act as if the kernel lacked an ioctl method: calls
// of it fail with EPROTONOSUPPORT without reaching the kernel, as on an
// older kernel. For tests of the fallback paths.
func (c *Conn) Hide(object, method uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hidden == nil {
		c.hidden = map[uint32]bool{}
	}
	c.hidden[uint32(object)<<16|uint32(method)] = true
	delete(c.probes, uint32(object)<<16|uint32(method))
	c.hides.Store(true)
	if object == objectDevice && method == methodInvokeWrite {
		c.invokeWrite.Store(2)
	}
}

func (c *Conn) isHidden(object, method uint16) bool {
	if !c.hides.Load() {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.hidden[uint32(object)<<16|uint32(method)]
}

// NewConn returns a Conn for fd, stamping driverID (enum rdma_driver_id)
// on every ioctl: the kernel refuses a mismatch with EINVAL.
func NewConn(fd int, driverID uint32) *Conn {
	return &Conn{fd: fd, driverID: driverID}
}

// Kernel answers uverbs commands in place of the kernel's char device. A
// device model implements it to run the whole stack, unchanged, against a
// device that is not there (mlx5 in tests); a nil Kernel is the real one.
// Pointers in the commands are addresses in this process, as the kernel
// would copy_from_user them.
type Kernel interface {
	// Ioctl runs RDMA_VERBS_IOCTL: hdr points at a struct
	// ib_uverbs_ioctl_hdr followed by its attributes.
	Ioctl(hdr unsafe.Pointer) unix.Errno
	// Write runs a write(2) command, framed as for the char device.
	Write(b []byte) unix.Errno
}

// NewKernelConn returns a Conn whose commands go to k instead of the char
// device; fd is still what providers mmap and what the caller closes.
func NewKernelConn(fd int, driverID uint32, k Kernel) *Conn {
	return &Conn{fd: fd, driverID: driverID, kernel: k}
}

// Close closes the fd. A Kernel with a Close method of its own (a device
// model) is told first: the kernel destroys the fd's objects when it
// closes, and a model must stop touching their memory as the device
// would.
func (c *Conn) Close() error {
	if k, ok := c.kernel.(interface{ Close() }); ok {
		k.Close()
	}
	return unix.Close(c.fd)
}

// FD returns the uverbs fd the Conn issues commands on (for providers'
// mmaps).
func (c *Conn) FD() int { return c.fd }

// DriverID returns the driver id the Conn stamps on ioctls.
func (c *Conn) DriverID() uint32 { return c.driverID }

// ForceWriteSyscall makes write commands go through write(2) even where
// the kernel has INVOKE_WRITE, to test that path.
func (c *Conn) ForceWriteSyscall() { c.invokeWrite.Store(2) }

// UsesInvokeWrite reports whether write commands travel inside the ioctl
// (true) or through write(2), probing once.
func (c *Conn) UsesInvokeWrite() bool {
	switch c.invokeWrite.Load() {
	case 1:
		return true
	case 2:
		return false
	}
	// As rdma-core does: INVOKE_WRITE of QUERY_DEVICE with no core input
	// is refused with ENOSPC by a kernel that knows the method.
	var cmd Cmd
	cmd.Reset(objectDevice, methodInvokeWrite)
	cmd.Const(attrWriteCmd, cmdQueryDevice)
	err := c.ioctl(&cmd)
	switch {
	case errors.Is(err, unix.ENOSPC), err == nil:
		c.invokeWrite.Store(1)
		return true
	case errors.Is(err, unix.EPROTONOSUPPORT), errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EOPNOTSUPP):
		c.invokeWrite.Store(2)
		return false
	}
	return false // inconclusive: not cached, write(2) this time
}

// Supports reports whether the kernel has the ioctl method, probing once:
// the method is called with no attributes, and EINVAL (mandatory
// attributes missing) means it exists, EPROTONOSUPPORT or ENOTTY that it
// does not. Nothing is created, provided the method has a mandatory
// attribute: never probe one whose attributes are all optional
// (GET_CONTEXT), since the probe would run it. Inconclusive answers are
// not cached.
func (c *Conn) Supports(object, method uint16) (bool, error) {
	key := uint32(object)<<16 | uint32(method)
	c.mu.RLock()
	ok, found := c.probes[key]
	c.mu.RUnlock()
	if found {
		return ok, nil
	}
	var cmd Cmd
	cmd.Reset(object, method)
	err := c.ioctl(&cmd)
	switch {
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSPC), err == nil:
		ok = true
	case errors.Is(err, unix.EPROTONOSUPPORT), errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EOPNOTSUPP):
		ok = false
	default:
		return false, err
	}
	c.mu.Lock()
	if c.probes == nil {
		c.probes = map[uint32]bool{}
	}
	c.probes[key] = ok
	c.mu.Unlock()
	return ok, nil
}

// Invoke sends cmd: an ioctl as built, or a write command through
// INVOKE_WRITE or write(2). The error is the bare errno.
func (c *Conn) Invoke(cmd *Cmd) error {
	if cmd.err != nil {
		return cmd.err
	}
	if cmd.write.active {
		if c.UsesInvokeWrite() {
			return c.invokeWriteCmd(cmd)
		}
		return c.writeSyscall(cmd)
	}
	return c.ioctl(cmd)
}

// WriteShort sends msg, a whole write command (header included) built by
// the caller, through write(2) as it is. rxe's send doorbell is built once
// per QP and sent so (kverbs.SendDoorbell): no command building on the
// post path. It allocates nothing.
func (c *Conn) WriteShort(msg []byte) error {
	var n uintptr
	var e unix.Errno
	if c.kernel != nil {
		if e = c.kernel.Write(msg); e == 0 {
			n = uintptr(len(msg))
		}
	} else {
		// Syscall, not RawSyscall: on 6.1 rxe sends the packets inside this
		// write, and the runtime must be free to hand the P to another
		// goroutine and to stop the world meanwhile.
		n, _, e = syscall.Syscall(unix.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(unsafe.SliceData(msg))), uintptr(len(msg)))
	}
	if e != 0 {
		return e
	}
	if int(n) != len(msg) {
		return unix.EIO
	}
	return nil
}

// WriteQuick is WriteShort through RawSyscall, which skips the
// scheduler's entry and exit: the goroutine keeps its P, and a stop of
// the world waits for it, until the write returns. Only for a write the
// caller knows the kernel finishes in a few microseconds (rxe's doorbell
// for one small request: see provider/rxe's PostSend).
func (c *Conn) WriteQuick(msg []byte) error {
	var n uintptr
	var e unix.Errno
	if c.kernel != nil {
		if e = c.kernel.Write(msg); e == 0 {
			n = uintptr(len(msg))
		}
	} else {
		// syscall's RawSyscall6, which syscall.RawSyscall calls: one call
		// less (x/sys/unix's is an assembly jump to it through an ABI
		// wrapper, two more).
		n, _, e = syscall.RawSyscall6(unix.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(unsafe.SliceData(msg))), uintptr(len(msg)), 0, 0, 0)
	}
	if e != 0 {
		return e
	}
	if int(n) != len(msg) {
		return unix.EIO
	}
	return nil
}

// WriteRaw sends a write command through write(2) whatever the kernel
// supports.
func (c *Conn) WriteRaw(cmd *Cmd) error {
	if cmd.err != nil {
		return cmd.err
	}
	if !cmd.write.active {
		return unix.EINVAL
	}
	return c.writeSyscall(cmd)
}

func (c *Conn) ioctl(cmd *Cmd) error {
	if c.isHidden(cmd.hdr.objectID, cmd.hdr.methodID) {
		cmd.sent = false // refused: Resend goes through Invoke again
		return unix.EPROTONOSUPPORT
	}
	cmd.hdr.length = uint16(unsafe.Sizeof(cmd.hdr)) + cmd.hdr.numAttrs*uint16(unsafe.Sizeof(attr{}))
	cmd.hdr.driverID = c.driverID
	var e unix.Errno
	if c.kernel != nil {
		e = c.kernel.Ioctl(unsafe.Pointer(&cmd.hdr))
	} else if cmd.short {
		// RawSyscall: a short command (a CQ arm) returns at once, taking no
		// lock and doing no packet work, so the runtime loses nothing.
		_, _, e = syscall.RawSyscall(unix.SYS_IOCTL, uintptr(c.fd), rdmaVerbsIoctl, uintptr(unsafe.Pointer(&cmd.hdr)))
	} else {
		_, _, e = syscall.Syscall(unix.SYS_IOCTL, uintptr(c.fd), rdmaVerbsIoctl, uintptr(unsafe.Pointer(&cmd.hdr)))
	}
	runtime.KeepAlive(cmd)
	cmd.sent = e == 0
	if e != 0 {
		return e
	}
	return nil
}

// Resend sends cmd again as the last Invoke sent it, when that was an
// ioctl the kernel accepted (a write command inside INVOKE_WRITE too):
// for a command that never changes, such as arming a CQ, nothing is built
// again. Any other command goes through Invoke. Only for commands whose
// outputs, if any, are read from the arena as Invoke leaves them.
func (c *Conn) Resend(cmd *Cmd) error {
	if !cmd.sent || cmd.write.active && !c.UsesInvokeWrite() {
		return c.Invoke(cmd)
	}
	return c.ioctl(cmd)
}

// invokeWriteCmd wraps a write command in UVERBS_METHOD_INVOKE_WRITE.
func (c *Conn) invokeWriteCmd(cmd *Cmd) error {
	w := &cmd.write
	cmd.hdr.numAttrs = 0
	cmd.Const(attrWriteCmd, uint64(w.cmd))
	cmd.ptrIn(attrCoreIn, w.coreIn)
	if w.hasOut {
		cmd.add(attrCoreOut, uint16(w.coreOut.len), attrFMandatory, cmd.addr(w.coreOut.off))
	}
	if w.haveUHWIn && w.uhwIn.len > 0 {
		cmd.ptrIn(AttrUHWIn, w.uhwIn)
	}
	if w.uhwOut.len > 0 {
		cmd.add(AttrUHWOut, uint16(w.uhwOut.len), attrFMandatory, cmd.addr(w.uhwOut.off))
	}
	if cmd.err != nil {
		return cmd.err
	}
	return c.ioctl(cmd)
}

// ptrIn adds a PTR_IN for an arena region: inline when it fits in 8 bytes.
func (c *Cmd) ptrIn(id uint16, r region) {
	if r.len <= 8 {
		i := c.add(id, uint16(r.len), attrFMandatory, 0)
		if i >= 0 {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&c.attrs[i].data)), 8), c.arena[r.off:r.off+r.len])
		}
		return
	}
	c.add(id, uint16(r.len), attrFMandatory, c.addr(r.off))
}

// writeSyscall frames a write command for write(2): a header, the core
// request (whose first u64 is the response address, for commands that
// answer), then the driver input; the kernel writes the core response and
// the driver response back to back at the response address.
func (c *Conn) writeSyscall(cmd *Cmd) error {
	w := &cmd.write
	ex := w.cmd&cmdFlagExtended != 0
	outLen := 0
	if w.hasOut {
		outLen = w.coreOut.len
	}
	outLen += w.uhwOut.len
	head := 8
	if ex {
		head = 24
	}
	inLen := w.coreIn.len + w.uhwIn.len
	buf, okb := cmd.alloc(head + inLen)
	resp, oko := cmd.alloc(outLen)
	if !okb || !oko {
		return cmd.err
	}
	b := cmd.arena[buf : buf+head+inLen]
	copy(b[head:], cmd.arena[w.coreIn.off:w.coreIn.off+w.coreIn.len])
	copy(b[head+w.coreIn.len:], cmd.arena[w.uhwIn.off:w.uhwIn.off+w.uhwIn.len])
	var respAddr uint64
	if outLen > 0 {
		respAddr = cmd.addr(resp)
	}
	ne := binary.NativeEndian
	if ex {
		if w.coreIn.len%8 != 0 || w.uhwIn.len%8 != 0 || w.coreOut.len%8 != 0 || w.uhwOut.len%8 != 0 {
			return unix.EINVAL // EX commands count 8-byte words
		}
		ne.PutUint32(b[0:], w.cmd)
		ne.PutUint16(b[4:], uint16(w.coreIn.len/8))
		coreOut := 0
		if w.hasOut {
			coreOut = w.coreOut.len
		}
		ne.PutUint16(b[6:], uint16(coreOut/8))
		ne.PutUint64(b[8:], respAddr) // struct ib_uverbs_ex_cmd_hdr
		ne.PutUint16(b[16:], uint16(w.uhwIn.len/8))
		ne.PutUint16(b[18:], uint16(w.uhwOut.len/8))
		ne.PutUint32(b[20:], 0)
	} else {
		if (head+inLen)%4 != 0 || outLen%4 != 0 {
			return unix.EINVAL // plain commands count 4-byte words
		}
		ne.PutUint32(b[0:], w.cmd)
		ne.PutUint16(b[4:], uint16((head+inLen)/4))
		ne.PutUint16(b[6:], uint16(outLen/4))
		if w.hasOut && w.coreIn.len >= 8 {
			ne.PutUint64(b[head:], respAddr) // the `response` member
		}
	}
	var n uintptr
	var e unix.Errno
	if c.kernel != nil {
		if e = c.kernel.Write(b); e == 0 {
			n = uintptr(len(b))
		}
	} else if cmd.short { // a CQ arm on a kernel without INVOKE_WRITE: quick, as in ioctl
		n, _, e = syscall.RawSyscall(unix.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	} else {
		n, _, e = syscall.Syscall(unix.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	}
	runtime.KeepAlive(cmd)
	if e != 0 {
		return e
	}
	if int(n) != len(b) {
		return unix.EIO
	}
	if w.hasOut {
		copy(cmd.arena[w.coreOut.off:w.coreOut.off+w.coreOut.len], cmd.arena[resp:resp+w.coreOut.len])
	}
	if w.uhwOut.len > 0 {
		o := resp
		if w.hasOut {
			o += w.coreOut.len
		}
		copy(cmd.arena[w.uhwOut.off:w.uhwOut.off+w.uhwOut.len], cmd.arena[o:o+w.uhwOut.len])
	}
	return nil
}
