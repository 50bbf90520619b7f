package cq

import (
	"encoding/binary"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setNonblockFresh sets O_NONBLOCK on a descriptor the kernel just made,
// whose other status flags are all clear: F_SETFL alone, no F_GETFL.
func setNonblockFresh(fd int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_NONBLOCK)
	return err
}

func closeFD(fd int) { unix.Close(fd) }

// readEvents reads struct ib_uverbs_comp_event_desc records (8 bytes,
// one per read) until it has limit of them, EAGAIN, or the pending buffer
// is full. Stopping early is safe: the next Wait or TryWait reads again
// before it parks.
func (ch *Channel) readEvents(limit int) {
	ch.lastRead = 0
	for ch.n < len(ch.pending) && ch.lastRead < limit {
		h, ok := ch.readOne()
		if !ok {
			return
		}
		ch.pending[(ch.head+ch.n)&(len(ch.pending)-1)] = h
		ch.n++
		ch.lastRead++
	}
}

// readOne reads one event record and returns the handle it names; ok is
// false with EAGAIN (none queued) and with an error, which it records in
// ch.readErr.
func (ch *Channel) readOne() (h uint64, ok bool) {
	for {
		n, err := rawRead(ch.fd, ch.rbuf[:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, false
		case err != nil:
			ch.readErr = err // EIO once the device is gone
			return 0, false
		case n != len(ch.rbuf):
			ch.readErr = unix.EIO
			return 0, false
		}
		return binary.NativeEndian.Uint64(ch.rbuf[:]), true
	}
}

// rawRead is read(2) through RawSyscall: the channel's fd is non-blocking
// (NewChannel makes it so, for the runtime's poller), so the call returns
// at once, and the scheduler's entry and exit around a system call
// (twice per Wait otherwise) are skipped.
// RawSyscall6, not RawSyscall, which only calls it.
func rawRead(fd int, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall6(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// newEpoll creates the channel's own epoll instance.
func newEpoll() (int, error) { return unix.EpollCreate1(unix.EPOLL_CLOEXEC) }

// epollWatch adds fd to the epoll instance epfd, level-triggered for
// input (the kernel adds EPOLLERR and EPOLLHUP), or takes it out. The
// event lives on the stack: no allocation.
func epollWatch(epfd, fd int, on bool) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	op := unix.EPOLL_CTL_ADD
	if !on {
		op = unix.EPOLL_CTL_DEL
	}
	_, _, e := syscall.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(&ev)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
