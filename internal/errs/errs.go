// Package errs defines goverbs' error types and sentinels once; uverbs
// and cq re-export them as the same values, so errors.Is and errors.As
// work whichever package a caller imports.
package errs

import (
	"errors"
	"fmt"
	"os"
)

// ErrClosed is returned by every method called after Close.
var ErrClosed = os.ErrClosed

// ErrNotSupported is returned where goverbs or the kernel lacks a feature,
// and on platforms without RDMA. It matches errors.ErrUnsupported.
var ErrNotSupported = errors.ErrUnsupported

// OpError is the error a failed verb returns: the libibverbs verb in lower
// case ("create cq"), the device, and the cause, whose errno is reachable
// through errors.Is (errors.Is(err, unix.EINVAL)).
type OpError struct {
	Op     string // "open", "create cq", "req notify cq"
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

// Timeout reports whether the cause is a timeout: a deadline or a
// context's that ran out. It makes an *OpError a net.Error's Timeout as
// the standard library's errors are, which matters where one is the
// cause of a *net.OpError (rdmanet's Dial): net.OpError.Timeout asks its
// cause directly, not through Unwrap.
func (e *OpError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// UnsupportedFeatureError says that the running kernel lacks a feature and
// which kernel has it. It matches ErrNotSupported.
type UnsupportedFeatureError struct {
	Name       string // "QP_CREATE ioctl"
	MinKernel  string // "5.8"
	underlying error
}

// NewUnsupported returns the error for a missing feature, wrapping the
// kernel's answer.
func NewUnsupported(name, minKernel string, kernelErr error) *UnsupportedFeatureError {
	return &UnsupportedFeatureError{Name: name, MinKernel: minKernel, underlying: kernelErr}
}

func (e *UnsupportedFeatureError) Error() string {
	return fmt.Sprintf("%s not supported (requires kernel >= %s)", e.Name, e.MinKernel)
}

// Is makes errors.Is(err, ErrNotSupported) true.
func (e *UnsupportedFeatureError) Is(target error) bool { return target == ErrNotSupported }

// Unwrap returns the kernel's answer, if any.
func (e *UnsupportedFeatureError) Unwrap() error { return e.underlying }
