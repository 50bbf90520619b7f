//go:build !(amd64 || 386 || arm64 || ppc64 || ppc64le || riscv64 || loong64 || mips64 || mips64le)

package mlx5

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// archRefusal is why Open refuses a ConnectX on this GOARCH: goverbs
// knows no barriers or UAR store here that it could stand behind, and a
// wrong one fails only under load, on the device.
var archRefusal = refusal(runtime.GOARCH)

// The bodies below order ordinary memory between goroutines, as
// sync/atomic's sequentially consistent operations do. That is all the
// device model (internal/mlx5model) needs, whose UAR pages and rings are
// ordinary memory, and its tests run through them here. They are not
// device barriers.

var fence atomic.Uint32

func mmioStore64(p unsafe.Pointer, v uint64) { atomic.StoreUint64((*uint64)(p), v) }
func dmaFence()                              { fence.Add(1) }
func readFence()                             { fence.Add(1) }
func wcFence()                               { fence.Add(1) }
