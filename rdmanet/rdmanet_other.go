//go:build !linux

package rdmanet

import (
	"context"
	"errors"
	"net"
	"time"
)

// Conn is a byte stream over an RDMA reliable connection; not on this
// system: every method returns an error wrapping errors.ErrUnsupported,
// or nil.
type Conn struct{}

// Read returns an error wrapping errors.ErrUnsupported.
func (c *Conn) Read(b []byte) (int, error) { return 0, unsupported("read") }

// Write returns an error wrapping errors.ErrUnsupported.
func (c *Conn) Write(b []byte) (int, error) { return 0, unsupported("write") }

// Close returns an error wrapping errors.ErrUnsupported.
func (c *Conn) Close() error { return unsupported("close") }

// CloseWrite returns an error wrapping errors.ErrUnsupported.
func (c *Conn) CloseWrite() error { return unsupported("close") }

// LocalAddr returns nil.
func (c *Conn) LocalAddr() net.Addr { return nil }

// RemoteAddr returns nil.
func (c *Conn) RemoteAddr() net.Addr { return nil }

// SetDeadline returns an error wrapping errors.ErrUnsupported.
func (c *Conn) SetDeadline(t time.Time) error { return unsupported("set deadline") }

// SetReadDeadline returns an error wrapping errors.ErrUnsupported.
func (c *Conn) SetReadDeadline(t time.Time) error { return unsupported("set deadline") }

// SetWriteDeadline returns an error wrapping errors.ErrUnsupported.
func (c *Conn) SetWriteDeadline(t time.Time) error { return unsupported("set deadline") }

// Register returns an error wrapping errors.ErrUnsupported.
func (c *Conn) Register(b []byte) (*Region, error) { return nil, unsupported("register") }

// ReadAt returns an error wrapping errors.ErrUnsupported.
func (c *Conn) ReadAt(t Token, off int64, dst []byte) (n int, err error) {
	return 0, unsupported("readat")
}

// WriteAt returns an error wrapping errors.ErrUnsupported.
func (c *Conn) WriteAt(t Token, off int64, src []byte) (n int, err error) {
	return 0, unsupported("writeat")
}

// Region is memory the peer may read and write with RDMA; not on this
// system.
type Region struct{}

// Token returns the zero Token.
func (r *Region) Token() Token { return Token{} }

// Bytes returns nil.
func (r *Region) Bytes() []byte { return nil }

// Close returns an error wrapping errors.ErrUnsupported.
func (r *Region) Close() error { return unsupported("close region") }

// Listener accepts rdmanet connections; not on this system.
type Listener struct{}

// Accept returns an error wrapping errors.ErrUnsupported.
func (l *Listener) Accept() (net.Conn, error) { return nil, unsupported("accept") }

// Close returns an error wrapping errors.ErrUnsupported.
func (l *Listener) Close() error { return unsupported("close") }

// Addr returns nil.
func (l *Listener) Addr() net.Addr { return nil }

// Dialer dials rdmanet connections.
type Dialer struct {
	Timeout  time.Duration
	Deadline time.Time
	Config   Config
}

// ListenConfig makes Listeners.
type ListenConfig struct {
	Config  Config
	Backlog int
}

func unsupported(op string) error {
	return &net.OpError{Op: op, Net: network, Err: errors.ErrUnsupported}
}

// Dial returns an error wrapping errors.ErrUnsupported.
func Dial(nw, address string) (net.Conn, error) { return nil, unsupported("dial") }

// DialContext returns an error wrapping errors.ErrUnsupported.
func (d *Dialer) DialContext(ctx context.Context, nw, address string) (net.Conn, error) {
	return nil, unsupported("dial")
}

// Listen returns an error wrapping errors.ErrUnsupported.
func Listen(nw, address string) (net.Listener, error) { return nil, unsupported("listen") }

// Listen returns an error wrapping errors.ErrUnsupported.
func (lc *ListenConfig) Listen(ctx context.Context, nw, address string) (net.Listener, error) {
	return nil, unsupported("listen")
}
