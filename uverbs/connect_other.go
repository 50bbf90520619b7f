//go:build !linux

package uverbs

import (
	"net/netip"

	"github.com/goverbs/goverbs/cq"
)

// FindGID returns an error wrapping ErrNotSupported.
func (c *Context) FindGID(port int, typ GIDType, addr netip.Addr) (GIDEntry, error) {
	return GIDEntry{}, unsupported("find gid", "")
}

// ConnectRC returns an error wrapping ErrNotSupported.
func (q *QP) ConnectRC(local, remote Endpoint, opts *ConnectOptions) error {
	return unsupported("connect rc", "")
}

// ConnectUD returns an error wrapping ErrNotSupported.
func (q *QP) ConnectUD(local Endpoint, opts *ConnectOptions) error {
	return unsupported("connect ud", "")
}

// NewAHTo returns an error wrapping ErrNotSupported.
func (p *PD) NewAHTo(local, remote Endpoint, opts *ConnectOptions) (*AH, error) {
	return nil, unsupported("create ah", "")
}

// NewAHFromWC returns an error wrapping ErrNotSupported.
func (p *PD) NewAHFromWC(wc cq.WC, grh []byte, port uint8) (*AH, error) {
	return nil, unsupported("create ah from wc", "")
}

// PostSendInline returns an error wrapping ErrNotSupported.
func (q *QP) PostSendInline(wr SendWR, data []byte) error { return unsupported("post send", "") }
