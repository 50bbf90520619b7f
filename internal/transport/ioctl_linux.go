package transport

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Invoke sends one RDMA_VERBS_IOCTL on fd with the given attributes and
// copies the attributes back afterwards, so that the kernel's write-back
// (VALID_OUTPUT flags, new IDR handles and fds) reaches the caller. Any
// memory an attribute points to must stay alive and unmoved for the call:
// it belongs in a heap buffer the caller keeps.
func Invoke(fd int, driverID uint32, object, method uint16, attrs []Attr) error {
	n := len(attrs)
	size := int(unsafe.Sizeof(Hdr{})) + n*int(unsafe.Sizeof(Attr{}))
	buf := make([]uint64, size/8) // 8-byte aligned, on the heap
	hdr := (*Hdr)(unsafe.Pointer(&buf[0]))
	*hdr = Hdr{Length: uint16(size), ObjectID: object, MethodID: method, NumAttrs: uint16(n), DriverID: driverID}
	out := unsafe.Slice((*Attr)(unsafe.Add(unsafe.Pointer(&buf[0]), unsafe.Sizeof(Hdr{}))), n)
	copy(out, attrs)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), RDMA_VERBS_IOCTL, uintptr(unsafe.Pointer(&buf[0])))
	runtime.KeepAlive(buf)
	copy(attrs, out)
	if e != 0 {
		return e
	}
	return nil
}
