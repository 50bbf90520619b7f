package cq

import (
	"encoding/binary"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func setNonblock(fd int) error { return unix.SetNonblock(fd, true) }

func closeFD(fd int) { unix.Close(fd) }

// readEvents reads struct ib_uverbs_comp_event_desc records (8 bytes,
// one per read) until it has limit of them, EAGAIN, or the pending buffer
// is full; an error it records in ch.readErr. Stopping early is safe: the
// next Wait or TryWait reads again before it parks.
func (ch *Channel) readEvents(limit int) {
	ch.lastRead = 0
	for ch.n < len(ch.pending) && ch.lastRead < limit {
		n, err := rawRead(ch.fd, ch.rbuf[:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return
		case err != nil:
			ch.readErr = err // EIO once the device is gone
			return
		case n != len(ch.rbuf):
			ch.readErr = unix.EIO
			return
		}
		ch.pending[(ch.head+ch.n)&(len(ch.pending)-1)] = binary.NativeEndian.Uint64(ch.rbuf[:])
		ch.n++
		ch.lastRead++
	}
}

// rawRead is read(2) through RawSyscall6: the channel's fd is
// non-blocking (setNonblock), so the call returns at once. A Syscall's
// scheduler entry would also wake the runtime's sysmon thread whenever
// the process was idle, as a Wait that found the channel empty and
// parked leaves it: two thread switches for every event, about 8,000
// instructions a transfer of the counted rdmanet ping-pong on 6.1.
func rawRead(fd int, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall6(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
