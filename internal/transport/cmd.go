package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"structs"
	"syscall"
	"unsafe"
)

// hdr mirrors struct ib_uverbs_ioctl_hdr (rdma_user_ioctl_cmds.h).
type hdr struct {
	_         structs.HostLayout
	length    uint16
	objectID  uint16
	methodID  uint16
	numAttrs  uint16
	reserved1 uint64
	driverID  uint32
	reserved2 uint32
}

// attr mirrors struct ib_uverbs_attr (rdma_user_ioctl_cmds.h).
type attr struct {
	_        structs.HostLayout
	attrID   uint16
	len      uint16
	flags    uint16
	attrData uint16
	data     uint64
}

var (
	_ [24]byte = [unsafe.Sizeof(hdr{})]byte{}
	_ [16]byte = [unsafe.Sizeof(attr{})]byte{}
)

const (
	// MaxAttrs is the most attributes one command carries.
	MaxAttrs = 24
	// ArenaSize is how many payload bytes one command carries.
	ArenaSize = 2048
)

// Cmd is one uverbs command being built: an ioctl (Reset) or a write
// command (ResetWrite). Its header, attributes and payload arena sit in
// one block, so a Cmd must live on the heap (new(Cmd), or a pool) and not
// be copied. A Cmd is not safe for concurrent use.
type Cmd struct {
	_     structs.HostLayout
	hdr   hdr
	attrs [MaxAttrs]attr // contiguous with hdr: the ioctl reads both
	arena [ArenaSize]byte
	// kind of each attr, to copy outputs back.
	outs  [MaxAttrs]out
	nOut  int
	used  int // arena bytes in use
	err   error
	write writeCmd // set by ResetWrite
	// short marks a command the kernel answers at once without blocking
	// (arming a CQ): it goes through RawSyscall, which skips the Go
	// scheduler's entry and exit. Not rxe's send doorbell, which may send
	// packets inside the call (Conn.WriteShort). Reset clears it.
	short bool
	// sent: the header and attributes are as the last ioctl, which the
	// kernel accepted, sent them (Conn.Resend). Reset clears it.
	sent bool
}

// out records where a PTR_OUT's bytes lie in the arena.
type out struct {
	attr     int
	off, len int
}

// writeCmd describes a legacy write command being built.
type writeCmd struct {
	active            bool
	cmd               uint32 // with cmdFlagExtended for an EX command
	coreIn, coreOut   region
	uhwIn, uhwOut     region
	haveUHWIn, hasOut bool
}

type region struct{ off, len int }

// arenaAlign is the alignment of every arena allocation: enough for any
// kernel struct (they use __aligned_u64 at most).
const arenaAlign = 8

// alloc reserves n zeroed bytes of the arena.
func (c *Cmd) alloc(n int) (int, bool) {
	off := (c.used + arenaAlign - 1) &^ (arenaAlign - 1)
	if n < 0 || off+n > len(c.arena) {
		if c.err == nil {
			c.err = fmt.Errorf("command payload of %d bytes does not fit the %d-byte arena", off+n, len(c.arena))
		}
		return 0, false
	}
	clear(c.arena[off : off+n])
	c.used = off + n
	return off, true
}

// ptr returns the address of arena offset off, which may be the end of
// the arena for an empty region (the Cmd goes on past it: still in the
// same allocation).
func (c *Cmd) ptr(off int) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(&c.arena), off) }

// addr returns arena offset off as the u64 the kernel takes; valid since a
// Cmd lives on the heap, which does not move.
func (c *Cmd) addr(off int) uint64 { return uint64(uintptr(c.ptr(off))) }

// Reset starts an ioctl command on object and method.
func (c *Cmd) Reset(object, method uint16) {
	c.hdr = hdr{objectID: object, methodID: method}
	c.nOut, c.used, c.err = 0, 0, nil
	c.write = writeCmd{}
	c.short, c.sent = false, false
}

// Short marks the command as one the kernel answers at once, never
// blocking, for RawSyscall. Only for commands that cannot sleep for long:
// the calling thread keeps its P for the whole call.
func (c *Cmd) Short() { c.short = true }

// Sent reports whether the last ioctl sent cmd as it is now and the
// kernel accepted it: Conn.Resend can send it again unbuilt.
func (c *Cmd) Sent() bool { return c.sent }

// Err reports the first error met while building.
func (c *Cmd) Err() error { return c.err }

func (c *Cmd) add(id uint16, length uint16, flags uint16, data uint64) int {
	n := int(c.hdr.numAttrs)
	if n == MaxAttrs {
		if c.err == nil {
			c.err = errors.New("too many command attributes")
		}
		return -1
	}
	c.attrs[n] = attr{attrID: id, len: length, flags: flags, data: data}
	c.hdr.numAttrs++
	return n
}

// In adds a PTR_IN attribute of n bytes and returns them to be filled in:
// inline in the attribute when n ≤ 8, as the kernel wants, else in the
// arena. The slice is valid until the next Reset.
func (c *Cmd) In(id uint16, n int) []byte {
	if n <= 8 {
		i := c.add(id, uint16(n), attrFMandatory, 0)
		if i < 0 {
			return make([]byte, n)
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(&c.attrs[i].data)), 8)[:n]
	}
	off, ok := c.alloc(n)
	if !ok {
		return make([]byte, n)
	}
	c.add(id, uint16(n), attrFMandatory, c.addr(off))
	return c.arena[off : off+n]
}

// InU32 adds a 4-byte PTR_IN (a u32 attribute), inline.
func (c *Cmd) InU32(id uint16, v uint32) { binary.NativeEndian.PutUint32(c.In(id, 4), v) }

// InU64 adds an 8-byte PTR_IN (a u64 attribute), inline.
func (c *Cmd) InU64(id uint16, v uint64) { binary.NativeEndian.PutUint64(c.In(id, 8), v) }

// Const adds a CONST attribute: always 8 bytes, inline.
func (c *Cmd) Const(id uint16, v uint64) { c.add(id, 8, attrFMandatory, v) }

// Flags32 adds a 4-byte FLAGS attribute, inline: the kernel reads it as
// the first four bytes of data (uverbs_get_flags64: *(u32 *)&data), not
// as data's value, which differs on big-endian machines.
func (c *Cmd) Flags32(id uint16, v uint32) { c.InU32(id, v) }

// Flags64 adds an 8-byte FLAGS attribute.
func (c *Cmd) Flags64(id uint16, v uint64) { c.add(id, 8, attrFMandatory, v) }

// Out adds a PTR_OUT attribute of n bytes. After Invoke, Output(h) holds
// what the kernel wrote, or nil if it wrote nothing. mandatory says
// whether a kernel that does not know the attribute must refuse the call.
func (c *Cmd) Out(id uint16, n int, mandatory bool) Handle {
	off, ok := c.alloc(n)
	if !ok {
		return -1
	}
	var fl uint16
	if mandatory {
		fl = attrFMandatory
	}
	i := c.add(id, uint16(n), fl, c.addr(off))
	if i < 0 || c.nOut == MaxAttrs {
		return -1
	}
	c.outs[c.nOut] = out{attr: i, off: off, len: n}
	c.nOut++
	return Handle(c.nOut - 1)
}

// Handle names an output of a Cmd.
type Handle int

// Output returns what the kernel wrote for PTR_OUT h, or nil if it did not
// set UVERBS_ATTR_F_VALID_OUTPUT. Valid until the next Reset.
func (c *Cmd) Output(h Handle) []byte {
	if h < 0 || int(h) >= c.nOut {
		return nil
	}
	o := c.outs[h]
	if c.attrs[o.attr].flags&attrFValidOutput == 0 {
		return nil
	}
	return c.arena[o.off : o.off+o.len]
}

// IDR adds an object handle (IDR attribute, len 0) for an existing object.
func (c *Cmd) IDR(id uint16, handle uint32) { c.add(id, 0, attrFMandatory, uint64(handle)) }

// IDRNew adds an IDR attribute for an object the call creates; NewHandle
// reads the handle the kernel wrote back.
func (c *Cmd) IDRNew(id uint16) Slot { return Slot(c.add(id, 0, attrFMandatory, 0)) }

// FD adds a file-descriptor attribute for an existing fd.
func (c *Cmd) FD(id uint16, fd int32) { c.add(id, 0, attrFMandatory, uint64(int64(fd))) }

// FDNew adds an FD attribute for an fd the call creates; NewFD reads it.
func (c *Cmd) FDNew(id uint16) Slot { return Slot(c.add(id, 0, attrFMandatory, 0)) }

// Slot names an IDR or FD attribute the kernel writes back.
type Slot int

// NewHandle returns the object handle the kernel wrote into slot s.
func (c *Cmd) NewHandle(s Slot) uint32 {
	if s < 0 || int(s) >= int(c.hdr.numAttrs) {
		return 0
	}
	return uint32(c.attrs[s].data)
}

// NewFD returns the fd the kernel wrote into slot s.
func (c *Cmd) NewFD(s Slot) int {
	if s < 0 || int(s) >= int(c.hdr.numAttrs) {
		return -1
	}
	return int(int64(c.attrs[s].data))
}

// UHWIn adds the driver's input (UVERBS_ATTR_UHW_IN) of n bytes and
// returns them to be filled in. Flagged mandatory, as rdma-core does.
func (c *Cmd) UHWIn(n int) []byte { return c.In(AttrUHWIn, n) }

// UHWOut adds the driver's output (UVERBS_ATTR_UHW_OUT) of n bytes.
func (c *Cmd) UHWOut(n int) Handle { return c.Out(AttrUHWOut, n, true) }

// ResetWrite starts a legacy write command cmd (IB_USER_VERBS_CMD_*, or
// IB_USER_VERBS_EX_CMD_* with ex set) with a core request of inLen bytes
// and a core response of outLen bytes (0 for none). The core request
// includes its leading `response` member for plain commands; for EX
// commands it is the part after struct ib_uverbs_ex_cmd_hdr. It returns
// the request bytes to fill in; CoreOut, WriteUHWIn and WriteUHWOut give
// the rest.
func (c *Cmd) ResetWrite(cmd uint32, ex bool, inLen, outLen int) []byte {
	c.Reset(objectDevice, methodInvokeWrite)
	c.write.active = true
	c.write.cmd = cmd
	if ex {
		c.write.cmd |= cmdFlagExtended
	}
	var req []byte
	c.write.coreIn, req = c.allocRegion(inLen)
	if outLen > 0 {
		c.write.coreOut, _ = c.allocRegion(outLen)
		c.write.hasOut = true
	}
	return req
}

// allocRegion reserves n bytes of the arena for a write command's region.
// When they do not fit, Err says so (Invoke refuses the command) and the
// region is empty, with scratch bytes for the caller to fill in: building
// never panics.
func (c *Cmd) allocRegion(n int) (region, []byte) {
	off, ok := c.alloc(n)
	if !ok {
		return region{}, make([]byte, max(n, 0))
	}
	return region{off, n}, c.arena[off : off+n]
}

// CoreOut returns the core response of a write command, valid after
// Invoke until the next Reset.
func (c *Cmd) CoreOut() []byte {
	r := c.write.coreOut
	return c.arena[r.off : r.off+r.len]
}

// WriteUHWIn adds n bytes of driver input to a write command.
func (c *Cmd) WriteUHWIn(n int) []byte {
	var b []byte
	c.write.uhwIn, b = c.allocRegion(n)
	c.write.haveUHWIn = true
	return b
}

// WriteUHWOut reserves n bytes of driver output for a write command and
// returns them; they hold the driver's response after Invoke.
func (c *Cmd) WriteUHWOut(n int) []byte {
	var b []byte
	c.write.uhwOut, b = c.allocRegion(n)
	return b
}

// As views b, a region of a Cmd's arena, as a *T, to fill in or read a
// kernel struct in place. b must be at least sizeof(T) long; arena
// regions are 8-byte aligned, enough for every uapi struct. It is for the
// regions the command itself sized (In, ResetWrite, CoreOut), where a
// short region is a bug in goverbs; a PTR_OUT the kernel may leave unset
// is read with OutputAs.
func As[T any](b []byte) *T {
	var zero T
	if uintptr(len(b)) < unsafe.Sizeof(zero) || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%unsafe.Alignof(zero) != 0 {
		panic("transport.As: region too short or misaligned for the type") // a bug in goverbs, never caller input
	}
	return (*T)(unsafe.Pointer(unsafe.SliceData(b)))
}

// OutputAs views what the kernel wrote for PTR_OUT h as a *T, in place.
// A kernel that left the output unset (no UVERBS_ATTR_F_VALID_OUTPUT), or
// wrote less than sizeof(T), gives an error wrapping EIO: a reply read
// from the kernel never reaches As's panic.
func OutputAs[T any](c *Cmd, h Handle) (*T, error) {
	b := c.Output(h)
	var zero T
	if uintptr(len(b)) < unsafe.Sizeof(zero) {
		id := -1
		if h >= 0 && int(h) < c.nOut {
			id = int(c.attrs[c.outs[h].attr].attrID)
		}
		return nil, fmt.Errorf("the kernel left output attribute %d unset: %w", id, syscall.EIO)
	}
	return As[T](b), nil
}

// SizeOf returns sizeof(T), for sizing command regions.
func SizeOf[T any]() int {
	var zero T
	return int(unsafe.Sizeof(zero))
}
