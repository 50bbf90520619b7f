package mutex

import (
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// membarrier(2) commands (linux/membarrier.h).
const (
	membarrierPrivateExpedited         = 1 << 3
	membarrierRegisterPrivateExpedited = 1 << 4
)

// Fenced reports whether a waiter can fence the unlockers: whether the
// process can use private expedited membarrier(2) (Linux 4.14, and no
// seccomp filter refusing it). The first call registers the process.
func Fenced() bool { return registered() }

var registered = sync.OnceValue(func() bool {
	_, _, e := syscall.RawSyscall(unix.SYS_MEMBARRIER, membarrierRegisterPrivateExpedited, 0, 0)
	return e == 0
})

// barrier runs a full memory barrier on every running thread of the
// process and reports whether it did.
func barrier() bool {
	if !registered() {
		return false
	}
	_, _, e := syscall.RawSyscall(unix.SYS_MEMBARRIER, membarrierPrivateExpedited, 0, 0)
	return e == 0
}
