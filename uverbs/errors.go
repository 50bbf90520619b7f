package uverbs

import "github.com/goverbs/goverbs/internal/errs"

// ErrNotSupported is returned where goverbs or the kernel lacks a feature,
// and on platforms without RDMA (goverbs runs on Linux only). It matches
// errors.ErrUnsupported.
var ErrNotSupported = errs.ErrNotSupported

// ErrClosed is returned by any method called after Close. It is os.ErrClosed.
var ErrClosed = errs.ErrClosed

// OpError is the error a failed verb returns: the libibverbs verb in lower
// case, the device, and the cause, with the errno reachable through
// errors.Is (errors.Is(err, unix.EINVAL)). cq.OpError is the same type.
type OpError = errs.OpError

// UnsupportedFeatureError says that the running kernel lacks a feature and
// names the first kernel that has it. errors.Is(err, ErrNotSupported) holds.
type UnsupportedFeatureError = errs.UnsupportedFeatureError
