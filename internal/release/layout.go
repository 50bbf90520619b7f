package release

import (
	"sync/atomic"
	"unsafe"
)

// Store32 writes through an *atomic.Uint32 as a *uint32: it must be one
// word, at offset 0.
var _ [unsafe.Sizeof(atomic.Uint32{}) - 4]struct{}
var _ [4 - unsafe.Sizeof(atomic.Uint32{})]struct{}
