//go:build !amd64 && !arm64

package mlx5

import (
	"sync/atomic"
	"unsafe"
)

// Elsewhere sync/atomic stands in: its operations are sequentially
// consistent, so each is a full fence. Correct, if slower than the
// architecture's own barriers; mlx5 hardware is seen on amd64 and arm64.

var fence atomic.Uint32

func mmioStore64(p unsafe.Pointer, v uint64) { atomic.StoreUint64((*uint64)(p), v) }
func dmaFence()                              { fence.Add(1) }
func readFence()                             { fence.Add(1) }
func wcFence()                               { fence.Add(1) }
