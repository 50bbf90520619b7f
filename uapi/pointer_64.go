//go:build !(386 || arm || mips || mipsle)

package uapi

import "unsafe"

// Pointer is a user-space address that the kernel reads from or writes to:
// a __u64 in the headers (__aligned_u64, or RDMA_UAPI_PTR), 8 bytes on
// every architecture. It holds an unsafe.Pointer, so the garbage collector
// keeps alive what it points to and stack growth moves it with its target,
// which a uint64 made from a uintptr would not. The zero value is null.
type Pointer struct {
	ptr unsafe.Pointer
}
