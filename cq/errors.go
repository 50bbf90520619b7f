package cq

import "github.com/goverbs/goverbs/internal/errs"

// ErrClosed is returned by any method called after Close. It is os.ErrClosed.
var ErrClosed = errs.ErrClosed

// ErrNotSupported is returned where the kernel or the provider lacks a
// feature. It matches errors.ErrUnsupported.
var ErrNotSupported = errs.ErrNotSupported

// OpError is the error a failed verb returns; it is uverbs.OpError.
type OpError = errs.OpError
