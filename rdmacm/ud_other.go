//go:build !linux

package rdmacm

import (
	"context"
	"net/netip"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

// UDConn is a UD QP the rdma_cm introduced to a peer. Not on this system.
type UDConn struct{}

// DialUD returns an error wrapping ErrNotSupported.
func DialUD(ctx context.Context, address string, cfg *Config) (*UDConn, error) {
	return nil, unsupported("dial")
}

// QP returns nil.
func (u *UDConn) QP() *uverbs.QP { return nil }

// CQ returns nil.
func (u *UDConn) CQ() *cq.CQ { return nil }

// CompChannel returns nil.
func (u *UDConn) CompChannel() *cq.Channel { return nil }

// PD returns nil.
func (u *UDConn) PD() *uverbs.PD { return nil }

// QKey returns 0.
func (u *UDConn) QKey() uint32 { return 0 }

// Peer returns the zero UDPeer.
func (u *UDConn) Peer() UDPeer { return UDPeer{} }

// LocalAddr returns the zero AddrPort.
func (u *UDConn) LocalAddr() netip.AddrPort { return netip.AddrPort{} }

// RemoteAddr returns the zero AddrPort.
func (u *UDConn) RemoteAddr() netip.AddrPort { return netip.AddrPort{} }

// PrivateData returns nil.
func (u *UDConn) PrivateData() []byte { return nil }

// ReplyTo returns an error wrapping ErrNotSupported.
func (u *UDConn) ReplyTo(wc cq.WC, buf []byte) (UDPeer, error) {
	return UDPeer{}, unsupported("create ah")
}

// Close returns an error wrapping ErrNotSupported.
func (u *UDConn) Close() error { return unsupported("close") }

// UDListener listens for UD requests. Not on this system.
type UDListener struct{}

// ListenUD returns an error wrapping ErrNotSupported.
func ListenUD(ctx context.Context, address string, cfg *Config) (*UDListener, error) {
	return nil, unsupported("listen")
}

// Addr returns the zero AddrPort.
func (l *UDListener) Addr() netip.AddrPort { return netip.AddrPort{} }

// Accept returns an error wrapping ErrNotSupported.
func (l *UDListener) Accept(ctx context.Context) (*UDConn, error) { return nil, unsupported("accept") }

// AcceptRequest returns an error wrapping ErrNotSupported.
func (l *UDListener) AcceptRequest(ctx context.Context) (*Request, error) {
	return nil, unsupported("accept")
}

// Close returns an error wrapping ErrNotSupported.
func (l *UDListener) Close() error { return unsupported("close") }

// AcceptUD returns an error wrapping ErrNotSupported.
func (r *Request) AcceptUD(ctx context.Context, cfg *Config) (*UDConn, error) {
	return nil, unsupported("accept")
}
