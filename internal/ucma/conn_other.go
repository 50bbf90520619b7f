//go:build !linux

package ucma

import "github.com/goverbs/goverbs/internal/errs"

// Conn is one open rdma_cm fd; there is none but on Linux.
type Conn struct{}

// Open fails: the rdma_cm is Linux's.
func Open() (*Conn, error) {
	return nil, &errs.OpError{Op: "open", Device: device, Err: errs.ErrPlatform}
}

// Close does nothing.
func (*Conn) Close() error { return nil }

// ABIVersion fails: the rdma_cm is Linux's.
func ABIVersion() (int, error) {
	return 0, &errs.OpError{Op: "abi version", Device: device, Err: errs.ErrPlatform}
}
