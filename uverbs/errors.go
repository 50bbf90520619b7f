package uverbs

import (
	"errors"
	"os"
)

// ErrNotSupported is returned where goverbs or the kernel lacks a feature,
// or on a platform without RDMA (goverbs runs on Linux only). It matches
// errors.ErrUnsupported.
var ErrNotSupported = errors.ErrUnsupported

// ErrClosed is returned by any method called after Close.
var ErrClosed = os.ErrClosed

// OpError is the error a failed verb returns: the libibverbs verb in lower
// case, the device, and the cause, with the errno reachable through
// errors.Is (errors.Is(err, unix.EINVAL)).
type OpError struct {
	Op     string // "open device", "create cq"
	Device string // "rxe0", or "" before a device is known
	Err    error
}

func (e *OpError) Error() string {
	if e.Device == "" {
		return e.Op + ": " + e.Err.Error()
	}
	return e.Op + " " + e.Device + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }
