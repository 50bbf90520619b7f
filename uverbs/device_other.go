//go:build !linux

package uverbs

import "github.com/goverbs/goverbs/internal/errs"

// On systems other than Linux, goverbs compiles with the same API, and
// every verb fails with an *OpError that wraps ErrNotSupported:
// "open rxe0: goverbs: RDMA verbs are not supported on darwin". Methods
// that return no error return zero values. Nothing here panics, on nil
// receivers either.

// unsupported is the error of verb op on device dev (which may be "").
func unsupported(op, dev string) error {
	return &OpError{Op: op, Device: dev, Err: errs.ErrPlatform}
}

// Devices returns an error wrapping ErrNotSupported: RDMA devices exist
// on Linux only.
func Devices() ([]Device, error) { return nil, unsupported("list devices", "") }

// DeviceByName returns an error wrapping ErrNotSupported: RDMA devices
// exist on Linux only.
func DeviceByName(name string) (Device, error) { return Device{}, unsupported("open", name) }
