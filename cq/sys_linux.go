package cq

import (
	"encoding/binary"

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
