//go:build (amd64 || 386) && !race

package release

import (
	"sync/atomic"
	"unsafe"
)

// Store32 stores v at p with release ordering: a plain MOV (the package
// comment says why that is enough here).
func Store32(p *atomic.Uint32, v uint32) { *(*uint32)(unsafe.Pointer(p)) = v }
