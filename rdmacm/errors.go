package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/goverbs/goverbs/internal/errs"
)

// OpError is the error every failed call returns: Op names the step
// ("resolve addr", "connect", "accept"), Device the address it was about
// ("192.0.2.1:7471"), and Err the cause: an errno (errors.Is(err,
// syscall.EINVAL)), a *RejectError, a context error, or ErrClosed. It is
// uverbs.OpError, the same type.
type OpError = errs.OpError

// The sentinels, the same values as uverbs' and cq's.
var (
	// ErrClosed is returned by every method called after Close, and by a
	// wait that Close ended.
	ErrClosed = errs.ErrClosed
	// ErrNotSupported is returned where goverbs or the kernel lacks a
	// feature, and on every system but Linux.
	ErrNotSupported = errs.ErrNotSupported
)

var errInvalid error = syscall.EINVAL

// RejectError says that the connection was refused: the peer's
// application rejected it (Reason 28, with its PrivateData), nobody
// listens on the port (Reason 8, within milliseconds), or the peer's CM
// refused it for another reason. errors.Is(err, syscall.ECONNREFUSED)
// is true of it.
type RejectError struct {
	// Reason is the CM's reject reason (enum ib_cm_rej_reason, IB_CM_REJ_*).
	Reason int
	// PrivateData is the REJECT message's private data: the peer's bytes
	// then zeros to the field's 148 bytes (empty where the CM, not an
	// application, rejected).
	PrivateData []byte
}

// Reject reasons a Go program meets most (IB_CM_REJ_*).
const (
	RejectInvalidServiceID = 8  // nobody listens on the port
	RejectConsumerDefined  = 28 // the peer's application rejected (Request.Reject)
)

func (e *RejectError) Error() string {
	switch e.Reason {
	case RejectInvalidServiceID:
		return "connection rejected: nobody listens on the port (reason 8, invalid service id)"
	case RejectConsumerDefined:
		return "connection rejected by the peer (reason 28, consumer defined)"
	case 4: // IB_CM_REJ_TIMEOUT
		return "connection rejected: the CM timed out (reason 4)"
	}
	return "connection rejected (reason " + strconv.Itoa(e.Reason) + ")"
}

// Is makes errors.Is(err, syscall.ECONNREFUSED) true.
func (e *RejectError) Is(target error) bool { return target == syscall.ECONNREFUSED }

// timeoutError is a wait that its context's deadline ended: it is
// context.DeadlineExceeded and os.ErrDeadlineExceeded both, and a
// net.Error whose Timeout is true.
type timeoutError struct{}

func (timeoutError) Error() string        { return "i/o timeout: " + context.DeadlineExceeded.Error() }
func (timeoutError) Unwrap() error        { return context.DeadlineExceeded }
func (timeoutError) Is(target error) bool { return target == os.ErrDeadlineExceeded }
func (timeoutError) Timeout() bool        { return true }
func (timeoutError) Temporary() bool      { return true }

// ctxErr is the error of a wait that ctx ended.
func ctxErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return timeoutError{}
	}
	return err
}

// eventErrnos is what an error event with status 0 stands for.
var eventErrnos = map[EventType]syscall.Errno{
	EventAddrError:     syscall.EADDRNOTAVAIL,
	EventRouteError:    syscall.ENETUNREACH,
	EventConnectError:  syscall.ECONNABORTED,
	EventUnreachable:   syscall.EHOSTUNREACH,
	EventDeviceRemoval: syscall.ENODEV,
}

// statusErr turns an event's status into an error (see Event.Err).
func statusErr(t EventType, status int, pd []byte) error {
	switch {
	case t == EventRejected:
		return &RejectError{Reason: status, PrivateData: append([]byte(nil), pd...)}
	case t == EventUnreachable && status > 0: // a UD peer's SIDR REP refused
		return &SIDRError{Status: status}
	case status < 0:
		return fmt.Errorf("%v: %w", t, syscall.Errno(-status))
	case status > 0:
		return fmt.Errorf("%v with status %d: %w", t, status, syscall.EIO)
	}
	if e, ok := eventErrnos[t]; ok {
		return fmt.Errorf("%v: %w", t, e)
	}
	return nil
}
