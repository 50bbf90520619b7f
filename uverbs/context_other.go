//go:build !linux

package uverbs

import (
	"context"
	"errors"

	"github.com/goverbs/goverbs/cq"
)

// Context is an open RDMA device (ibv_context). Not on this system: Open
// fails, and every method returns an error wrapping ErrNotSupported.
type Context struct{}

// Open returns an error wrapping ErrNotSupported: RDMA devices exist on
// Linux only.
func Open(name string) (*Context, error) { return nil, unsupported("open", name) }

// Open returns an error wrapping ErrNotSupported.
func (d Device) Open() (*Context, error) { return nil, unsupported("open", d.Name) }

// Device returns the zero Device.
func (c *Context) Device() Device { return Device{} }

// NumCompVectors returns 0.
func (c *Context) NumCompVectors() int { return 0 }

// Close returns an error wrapping ErrNotSupported.
func (c *Context) Close() error { return unsupported("close", "") }

// AllocPD returns an error wrapping ErrNotSupported.
func (c *Context) AllocPD() (*PD, error) { return nil, unsupported("alloc pd", "") }

// NewCompChannel returns an error wrapping ErrNotSupported.
func (c *Context) NewCompChannel() (*cq.Channel, error) {
	return nil, unsupported("create comp channel", "")
}

// NewCQ returns an error wrapping ErrNotSupported.
func (c *Context) NewCQ(cfg cq.Config) (*cq.CQ, error) {
	return nil, unsupported("create cq", "")
}

// ErrCQOverrun is the error of every Poll and ReqNotify on a CQ after the
// device reported it overran (the async event CQ_ERR). Never returned on
// this system.
var ErrCQOverrun = errors.New("cq overrun: completions were lost (async event CQ_ERR)")

// ErrDeviceFatal is the error of every Poll, ReqNotify and post on a
// Context after its device failed or was removed (the async event
// DEVICE_FATAL). Never returned on this system.
var ErrDeviceFatal = errors.New("device fatal: the device failed or was removed (async event DEVICE_FATAL)")

// QueryDevice returns an error wrapping ErrNotSupported.
func (c *Context) QueryDevice() (DeviceAttr, error) {
	return DeviceAttr{}, unsupported("query device", "")
}

// QueryPort returns an error wrapping ErrNotSupported.
func (c *Context) QueryPort(port int) (PortAttr, error) {
	return PortAttr{}, unsupported("query port", "")
}

// QueryGID returns an error wrapping ErrNotSupported.
func (c *Context) QueryGID(port, index int) (GIDEntry, error) {
	return GIDEntry{}, unsupported("query gid", "")
}

// GIDTable returns an error wrapping ErrNotSupported.
func (c *Context) GIDTable(port int) ([]GIDEntry, error) {
	return nil, unsupported("query gid", "")
}

// TryAsyncEvent returns an error wrapping ErrNotSupported.
func (c *Context) TryAsyncEvent() (AsyncEvent, bool, error) {
	return AsyncEvent{}, false, unsupported("get async event", "")
}

// WaitAsyncEvent returns an error wrapping ErrNotSupported, at once.
func (c *Context) WaitAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	return AsyncEvent{}, unsupported("get async event", "")
}

// QueryPKey returns an error wrapping ErrNotSupported.
func (c *Context) QueryPKey(port, index int) (uint16, error) {
	return 0, unsupported("query pkey", "")
}

// PKeyIndex returns an error wrapping ErrNotSupported.
func (c *Context) PKeyIndex(port int, pkey uint16) (int, error) {
	return 0, unsupported("get pkey index", "")
}

// PortCounters returns an error wrapping ErrNotSupported.
func (c *Context) PortCounters(port int) ([]Counter, error) {
	return nil, unsupported("read port counters", "")
}
