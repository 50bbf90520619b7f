package uverbs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// SGE returns the scatter/gather entry for n bytes at offset off of the
// MR's memory. A range outside the memory is an error wrapping EINVAL
// that names it, where the device would fail the work request only when
// it ran, moving its QP to the error state; after Close it is ErrClosed.
// Build the entries once and post them many times: SGE takes the MR's
// lock.
func (m *MR) SGE(off, n int) (SGE, error) {
	const op = "make sge"
	if off < 0 || n < 0 || off > len(m.mem) || n > len(m.mem)-off || int64(n) > 1<<31 {
		return SGE{}, m.pd.ctx.opErr(op, fmt.Errorf("%d bytes at offset %d of a %d-byte MR: %w", n, off, len(m.mem), unix.EINVAL))
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return SGE{}, m.pd.ctx.opErr(op, fmt.Errorf("mr: %w", ErrClosed))
	}
	return SGE{Addr: m.Addr() + uint64(off), Length: uint32(n), LKey: m.ref.LKey}, nil
}
