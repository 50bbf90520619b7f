//go:build mips

package uapi

import "unsafe"

// Pointer is a user-space address that the kernel reads from or writes to:
// a __u64 in the headers. On a 32-bit big-endian machine the address is
// its low half, second; the high half stays zero. The zero value is null.
type Pointer struct {
	_   uint32
	ptr unsafe.Pointer
}
