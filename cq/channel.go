package cq

import (
	"os"
	"sync"

	"syscall"
)

// Channel is a completion channel (ibv_comp_channel): a file descriptor
// the kernel writes one event to each time an armed CQ attached to it
// gets a completion. Many CQs may share one Channel.
//
// Create one with uverbs.Context.NewCompChannel. A Channel is safe for
// concurrent use.
type Channel struct {
	dev string
	f   *os.File // non-blocking

	mu     sync.Mutex
	users  int  // guarded by mu: CQs attached
	closed bool // guarded by mu
}

// NewChannel wraps fd, a completion channel the kernel created for device
// dev, and takes ownership of it. uverbs.Context.NewCompChannel calls it;
// there is no reason to call it directly.
func NewChannel(fd int, dev string) (*Channel, error) {
	if err := setNonblock(fd, true); err != nil {
		closeFD(fd)
		return nil, &OpError{Op: "create comp channel", Device: dev, Err: err}
	}
	return &Channel{dev: dev, f: os.NewFile(uintptr(fd), dev+"-comp-channel")}, nil
}

// FD returns the channel's file descriptor, for CQ creation and for
// callers that poll it themselves. It stays owned by the Channel.
func (ch *Channel) FD() int { return int(ch.f.Fd()) }

// attach counts a CQ that uses the channel; it fails once the channel is
// closed.
func (ch *Channel) attach() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return ErrClosed
	}
	ch.users++
	return nil
}

func (ch *Channel) detach() {
	ch.mu.Lock()
	ch.users--
	ch.mu.Unlock()
}

// Close destroys the channel (ibv_destroy_comp_channel). It fails with an
// error wrapping EBUSY while a CQ still uses the channel, and with
// ErrClosed the second time.
func (ch *Channel) Close() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch {
	case ch.closed:
		return &OpError{Op: "destroy comp channel", Device: ch.dev, Err: ErrClosed}
	case ch.users > 0:
		return &OpError{Op: "destroy comp channel", Device: ch.dev,
			Err: &busyError{n: ch.users}}
	}
	ch.closed = true
	if err := ch.f.Close(); err != nil {
		return &OpError{Op: "destroy comp channel", Device: ch.dev, Err: err}
	}
	return nil
}

type busyError struct{ n int }

func (e *busyError) Error() string {
	if e.n == 1 {
		return "1 CQ still uses the channel: " + syscall.EBUSY.Error()
	}
	return itoa(e.n) + " CQs still use the channel: " + syscall.EBUSY.Error()
}

func (e *busyError) Unwrap() error { return syscall.EBUSY }

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}
