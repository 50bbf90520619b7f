//go:build !linux

package errs

import "runtime"

// ErrPlatform is the cause of every verb's failure on a system without
// RDMA verbs (every GOOS but linux): "goverbs: RDMA verbs are not
// supported on darwin". It wraps ErrNotSupported.
var ErrPlatform error = platformError{}

type platformError struct{}

func (platformError) Error() string {
	return "goverbs: RDMA verbs are not supported on " + runtime.GOOS
}

func (platformError) Unwrap() error { return ErrNotSupported }
