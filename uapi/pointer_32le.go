//go:build 386 || arm || mipsle

package uapi

import "unsafe"

// Pointer is a user-space address that the kernel reads from or writes to:
// a __u64 in the headers. On a 32-bit little-endian machine the address is
// its low half, first; the high half stays zero. The zero value is null.
type Pointer struct {
	ptr unsafe.Pointer
	_   uint32
}
