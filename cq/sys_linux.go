package cq

import (
	"encoding/binary"

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
// is full; an error it records in ch.readErr. Stopping early is safe: the
// next Wait or TryWait reads again before it parks.
func (ch *Channel) readEvents(limit int) {
	ch.lastRead = 0
	for ch.n < len(ch.pending) && ch.lastRead < limit {
		n, err := unix.Read(ch.fd, ch.rbuf[:])
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
