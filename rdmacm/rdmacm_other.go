//go:build !linux

package rdmacm

import (
	"context"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/uverbs"
)

// The rdma_cm is Linux's: on this system every call returns an error
// wrapping ErrNotSupported, or a zero value.

type eventState struct{}

func unsupported(op string) error { return &OpError{Op: op, Device: "rdma_cm", Err: errs.ErrPlatform} }

// EventChannel is one open rdma_cm file descriptor. Not on this system.
type EventChannel struct{}

// NewEventChannel returns an error wrapping ErrNotSupported.
func NewEventChannel() (*EventChannel, error) { return nil, unsupported("create event channel") }

// Close returns an error wrapping ErrNotSupported.
func (ch *EventChannel) Close() error { return unsupported("destroy event channel") }

// NewID returns an error wrapping ErrNotSupported.
func (ch *EventChannel) NewID(ps PortSpace) (*ID, error) { return nil, unsupported("create id") }

// Wait returns an error wrapping ErrNotSupported.
func (ch *EventChannel) Wait(ctx context.Context) (*Event, error) {
	return nil, unsupported("get cm event")
}

// TryWait returns an error wrapping ErrNotSupported.
func (ch *EventChannel) TryWait() (*Event, bool, error) {
	return nil, false, unsupported("get cm event")
}

// Ack returns an error wrapping ErrNotSupported.
func (e *Event) Ack() error { return unsupported("ack cm event") }

// ID is a connection-manager identifier. Not on this system.
type ID struct{}

// PortSpace returns 0.
func (id *ID) PortSpace() PortSpace { return 0 }

// Bind returns an error wrapping ErrNotSupported.
func (id *ID) Bind(addr netip.AddrPort) error { return unsupported("bind addr") }

// SetTOS returns an error wrapping ErrNotSupported.
func (id *ID) SetTOS(tos uint8) error { return unsupported("set option") }

// SetReuseAddr returns an error wrapping ErrNotSupported.
func (id *ID) SetReuseAddr(on bool) error { return unsupported("set option") }

// SetAFOnly returns an error wrapping ErrNotSupported.
func (id *ID) SetAFOnly(on bool) error { return unsupported("set option") }

// SetAckTimeout returns an error wrapping ErrNotSupported.
func (id *ID) SetAckTimeout(d time.Duration) error { return unsupported("set option") }

// ResolveAddr returns an error wrapping ErrNotSupported.
func (id *ID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error {
	return unsupported("resolve addr")
}

// ResolveRoute returns an error wrapping ErrNotSupported.
func (id *ID) ResolveRoute(timeout time.Duration) error { return unsupported("resolve route") }

// Listen returns an error wrapping ErrNotSupported.
func (id *ID) Listen(backlog int) error { return unsupported("listen") }

// Addrs returns an error wrapping ErrNotSupported.
func (id *ID) Addrs() (local, remote netip.AddrPort, err error) {
	return netip.AddrPort{}, netip.AddrPort{}, unsupported("query addr")
}

// PD returns an error wrapping ErrNotSupported.
func (id *ID) PD() (*uverbs.PD, error) { return nil, unsupported("open device") }

// InitQPAttr returns an error wrapping ErrNotSupported.
func (id *ID) InitQPAttr(state uverbs.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	return uverbs.QPAttr{}, 0, unsupported("init qp attr")
}

// QP returns nil.
func (id *ID) QP() *uverbs.QP { return nil }

// AttachQP returns an error wrapping ErrNotSupported.
func (id *ID) AttachQP(qp *uverbs.QP) error { return unsupported("attach qp") }

// Notify returns an error wrapping ErrNotSupported.
func (id *ID) Notify(event uverbs.AsyncEventType) error { return unsupported("notify") }

// Establish returns an error wrapping ErrNotSupported.
func (id *ID) Establish() error { return unsupported("establish") }

// Connect returns an error wrapping ErrNotSupported.
func (id *ID) Connect(p *ConnParam) error { return unsupported("connect") }

// Accept returns an error wrapping ErrNotSupported.
func (id *ID) Accept(p *ConnParam) error { return unsupported("accept") }

// Reject returns an error wrapping ErrNotSupported.
func (id *ID) Reject(privateData []byte) error { return unsupported("reject") }

// Disconnect returns an error wrapping ErrNotSupported.
func (id *ID) Disconnect() error { return unsupported("disconnect") }

// Migrate returns an error wrapping ErrNotSupported.
func (id *ID) Migrate(to *EventChannel) error { return unsupported("migrate id") }

// Close returns an error wrapping ErrNotSupported.
func (id *ID) Close() error { return unsupported("destroy id") }

// Conn is an established RC connection. Not on this system.
type Conn struct{}

// Dial returns an error wrapping ErrNotSupported.
func Dial(ctx context.Context, address string, cfg *Config) (*Conn, error) {
	return nil, unsupported("dial")
}

// Disconnected returns nil.
func (c *Conn) Disconnected() <-chan struct{} { return nil }

// QP returns nil.
func (c *Conn) QP() *uverbs.QP { return nil }

// CQ returns nil.
func (c *Conn) CQ() *cq.CQ { return nil }

// CompChannel returns nil.
func (c *Conn) CompChannel() *cq.Channel { return nil }

// PD returns nil.
func (c *Conn) PD() *uverbs.PD { return nil }

// LocalAddr returns the zero AddrPort.
func (c *Conn) LocalAddr() netip.AddrPort { return netip.AddrPort{} }

// RemoteAddr returns the zero AddrPort.
func (c *Conn) RemoteAddr() netip.AddrPort { return netip.AddrPort{} }

// PrivateData returns nil.
func (c *Conn) PrivateData() []byte { return nil }

// Close returns an error wrapping ErrNotSupported.
func (c *Conn) Close() error { return unsupported("close") }

// Listener listens for RC connections. Not on this system.
type Listener struct{}

// Listen returns an error wrapping ErrNotSupported.
func Listen(ctx context.Context, address string, cfg *Config) (*Listener, error) {
	return nil, unsupported("listen")
}

// Addr returns the zero AddrPort.
func (l *Listener) Addr() netip.AddrPort { return netip.AddrPort{} }

// Accept returns an error wrapping ErrNotSupported.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) { return nil, unsupported("accept") }

// AcceptRequest returns an error wrapping ErrNotSupported.
func (l *Listener) AcceptRequest(ctx context.Context) (*Request, error) {
	return nil, unsupported("accept")
}

// Close returns an error wrapping ErrNotSupported.
func (l *Listener) Close() error { return unsupported("close") }

// Request is a connection request. Not on this system.
type Request struct{}

// PrivateData returns nil.
func (r *Request) PrivateData() []byte { return nil }

// RemoteAddr returns the zero AddrPort.
func (r *Request) RemoteAddr() netip.AddrPort { return netip.AddrPort{} }

// LocalAddr returns the zero AddrPort.
func (r *Request) LocalAddr() netip.AddrPort { return netip.AddrPort{} }

// Accept returns an error wrapping ErrNotSupported.
func (r *Request) Accept(ctx context.Context, cfg *Config) (*Conn, error) {
	return nil, unsupported("accept")
}

// Reject returns an error wrapping ErrNotSupported.
func (r *Request) Reject(privateData []byte) error { return unsupported("reject") }

// JoinMulticast returns an error wrapping ErrNotSupported.
func JoinMulticast(ctx context.Context, local, group string, cfg *Config) (*UDConn, error) {
	return nil, unsupported("join multicast")
}

// Leave returns an error wrapping ErrNotSupported.
func (u *UDConn) Leave() error { return unsupported("leave multicast") }
