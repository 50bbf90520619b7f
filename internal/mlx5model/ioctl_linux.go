package mlx5model

import (
	"encoding/binary"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// The ioctl framework, as drivers/infiniband/core/uverbs_ioctl.c applies
// it: header checks, attributes checked against the method's spec
// (unknown mandatory ones refused with EPROTONOSUPPORT, missing mandatory
// ones with EINVAL), inline payloads up to 8 bytes, outputs flagged
// UVERBS_ATTR_F_VALID_OUTPUT, new handles and fds written back into the
// attribute.

const (
	hdrSize  = int(unsafe.Sizeof(uapi.IBUverbsIoctlHdr{}))
	attrSize = int(unsafe.Sizeof(uapi.IBUverbsAttr{}))
	// cmdSize bounds the memory a command's pointers may reach: every
	// command comes from a transport.Cmd, whose header, attributes and
	// payloads lie in one block starting at the header.
	cmdSize = unsafe.Sizeof(transport.Cmd{})
)

type attrKind uint8

const (
	kPtrIn attrKind = iota
	kPtrOut
	kConst
	kFlags
	kIDR    // an existing object's handle
	kIDRNew // a handle the call creates
	kFD     // an existing fd
	kFDNew  // an fd the call creates
)

type attrSpec struct {
	id        uint16
	kind      attrKind
	mandatory bool
	min, max  int // PTR_IN lengths; PTR_OUT min
}

type method struct {
	attrs  []attrSpec
	udata  bool // takes UVERBS_ATTR_UHW_IN/OUT
	noCtx  bool // may run before GET_CONTEXT
	handle func(a *args) unix.Errno
}

func key(object, method uint16) uint32 { return uint32(object)<<16 | uint32(method) }

// args is one ioctl being answered.
type args struct {
	c     *Context
	hdr   unsafe.Pointer
	attrs []uapi.IBUverbsAttr
	m     *method
	idx   map[uint16]int // attribute id -> index
}

// Ioctl answers RDMA_VERBS_IOCTL (transport.Kernel).
func (c *Context) Ioctl(hdrp unsafe.Pointer) (e unix.Errno) {
	h := (*uapi.IBUverbsIoctlHdr)(hdrp)
	n := int(h.NumAttrs)
	if int(h.Length) != hdrSize+n*attrSize || int(h.Length) > uarPageSize {
		return unix.EINVAL
	}
	if h.Reserved1 != 0 || h.Reserved2 != 0 {
		return unix.EPROTONOSUPPORT
	}
	if h.DriverID != uapi.RDMA_DRIVER_MLX5 {
		return unix.EINVAL
	}
	m := c.d.methods()[key(h.ObjectID, h.MethodID)]
	if m == nil {
		return unix.EPROTONOSUPPORT
	}
	a := &args{c: c, hdr: hdrp, m: m, idx: make(map[uint16]int, n)}
	if n > 0 {
		a.attrs = unsafe.Slice((*uapi.IBUverbsAttr)(unsafe.Add(hdrp, hdrSize)), n)
	}
	if e := a.check(); e != 0 {
		return e
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	// Memory the command names may be gone: copy_from_user's EFAULT.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			c.d.fault(r)
			e = unix.EFAULT
		}
	}()
	if c.released {
		return unix.EIO
	}
	if c.removed {
		return c.afterRemoval(a)
	}
	if !m.noCtx && !c.ucontext {
		return unix.EINVAL
	}
	c.d.drainDoorbells()
	e = m.handle(a)
	c.d.kick()
	return e
}

// Write answers a write(2) command: the model takes write commands only
// inside UVERBS_METHOD_INVOKE_WRITE, as a kernel ≥ 5.0 does for rdma-core.
func (c *Context) Write(b []byte) unix.Errno { return unix.EOPNOTSUPP }

// check validates the attributes against the method's spec.
func (a *args) check() unix.Errno {
	for i := range a.attrs {
		at := &a.attrs[i]
		if _, dup := a.idx[at.AttrID]; dup {
			return unix.EINVAL
		}
		sp := a.spec(at.AttrID)
		if sp == nil {
			if at.Flags&uapi.UVERBS_ATTR_F_MANDATORY != 0 {
				return unix.EPROTONOSUPPORT
			}
			continue // an unknown optional attribute is ignored
		}
		a.idx[at.AttrID] = i
		if at.AttrData != [2]byte{} {
			return unix.EINVAL
		}
		l := int(at.Len)
		switch sp.kind {
		case kPtrIn:
			if l < sp.min || (sp.max > 0 && l > sp.max) {
				return unix.EINVAL
			}
		case kPtrOut:
			if l < sp.min {
				return unix.EINVAL
			}
		case kConst:
			if l != 8 {
				return unix.EINVAL
			}
		case kFlags:
			if l != 4 && l != 8 {
				return unix.EINVAL
			}
		}
	}
	for _, sp := range a.m.attrs {
		if _, ok := a.idx[sp.id]; sp.mandatory && !ok {
			return unix.EINVAL
		}
	}
	return 0
}

var uhwSpecs = []attrSpec{
	{id: uapi.UVERBS_ATTR_UHW_IN, kind: kPtrIn},
	{id: uapi.UVERBS_ATTR_UHW_OUT, kind: kPtrOut},
}

func (a *args) spec(id uint16) *attrSpec {
	for i := range a.m.attrs {
		if a.m.attrs[i].id == id {
			return &a.m.attrs[i]
		}
	}
	if a.m.udata {
		for i := range uhwSpecs {
			if uhwSpecs[i].id == id {
				return &uhwSpecs[i]
			}
		}
	}
	return nil
}

func (a *args) has(id uint16) bool { _, ok := a.idx[id]; return ok }

// mem returns n bytes at address addr of the command; nil if they are not
// inside it (EFAULT for the caller).
func (a *args) mem(addr uint64, n int) []byte {
	base := uint64(uintptr(a.hdr))
	if addr < base || addr+uint64(n) > base+uint64(cmdSize) || addr+uint64(n) < addr {
		return nil
	}
	return bytesAt(unsafe.Add(a.hdr, uintptr(addr-base)), n)
}

// in returns a PTR_IN attribute's bytes, nil when absent; ok is false on
// a bad pointer.
func (a *args) in(id uint16) (b []byte, ok bool) {
	i, found := a.idx[id]
	if !found {
		return nil, true
	}
	at := &a.attrs[i]
	if at.Len <= 8 {
		return bytesAt(unsafe.Pointer(&at.Data), 8)[:at.Len], true
	}
	b = a.mem(at.Data, int(at.Len))
	return b, b != nil
}

// val returns an inline attribute's value (CONST, FLAGS, IDR, FD, and
// 4- or 8-byte PTR_INs), read as the kernel reads it.
func (a *args) val(id uint16) uint64 {
	i, ok := a.idx[id]
	if !ok {
		return 0
	}
	at := &a.attrs[i]
	raw := bytesAt(unsafe.Pointer(&at.Data), 8)
	switch {
	case a.spec(id).kind == kPtrIn && at.Len == 4, a.spec(id).kind == kFlags && at.Len == 4:
		return uint64(binary.NativeEndian.Uint32(raw))
	default:
		return at.Data
	}
}

// out writes an output attribute (min(len, len(b)) bytes) and flags it
// valid; false when absent. A bad pointer is false too.
func (a *args) out(id uint16, b []byte) bool {
	i, ok := a.idx[id]
	if !ok {
		return false
	}
	at := &a.attrs[i]
	dst := a.mem(at.Data, int(at.Len))
	if dst == nil {
		return false
	}
	clear(dst)
	copy(dst, b)
	at.Flags |= uapi.UVERBS_ATTR_F_VALID_OUTPUT
	return true
}

// outLen returns the length of an output attribute, -1 when absent.
func (a *args) outLen(id uint16) int {
	if i, ok := a.idx[id]; ok {
		return int(a.attrs[i].Len)
	}
	return -1
}

// setNew writes back the handle or fd a NEW attribute created.
func (a *args) setNew(id uint16, v uint64) {
	if i, ok := a.idx[id]; ok {
		a.attrs[i].Data = v
	}
}

func u32b(v uint32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return b
}

func u64b(v uint64) []byte {
	b := make([]byte, 8)
	binary.NativeEndian.PutUint64(b, v)
	return b
}

// structBytes views a struct as bytes.
func structBytes[T any](p *T) []byte { return bytesAt(unsafe.Pointer(p), int(unsafe.Sizeof(*p))) }

// view returns a T read from b (zero-extended when shorter), in a fresh
// buffer the garbage collector does not scan: pointer fields (uapi.Pointer)
// are read out of it with ptrOf, never kept there.
func view[T any](b []byte) *T {
	var zero T
	buf := make([]uint64, (unsafe.Sizeof(zero)+7)/8)
	copy(bytesAt(unsafe.Pointer(unsafe.SliceData(buf)), len(buf)*8), b)
	return (*T)(unsafe.Pointer(unsafe.SliceData(buf)))
}

// methods returns the method table.
func (d *Device) methods() map[uint32]*method {
	methodsOnce.Do(buildMethods)
	if d.opts.StaticUAR {
		return methodTableStatic
	}
	return methodTable
}
