package uverbs

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/uapi"
)

// flushCaps are the device capabilities the flush rights need, each
// Access bit's own; capsKnown marks the Context's cached answer (bit 0 is
// none of them).
const (
	flushCaps = DeviceCapFlushGlobal | DeviceCapFlushPersistent
	capsKnown = 1
)

// checkFlushAccess returns nil if the device takes the flush rights in
// access (AccessFlushGlobal, AccessFlushPersistent), or none are asked
// for; else an error wrapping ErrNotSupported that names what has them.
// It asks the device once per Context (its capabilities, not the
// kernel's version): 6.1's kernel answers a registration with these bits
// with a bare EINVAL. The caller holds the Context (use).
func (c *Context) checkFlushAccess(access Access) error {
	if access&(AccessFlushGlobal|AccessFlushPersistent) == 0 {
		return nil
	}
	caps := DeviceCap(c.flushCaps.Load())
	if caps == 0 {
		r, err := kverbs.QueryDevice(c.conn)
		if err != nil { // inconclusive: asked again next time
			return fmt.Errorf("query device for its flush capabilities: %w", err)
		}
		caps = DeviceCap(r.DeviceCapFlagsEx)&flushCaps | capsKnown
		c.flushCaps.Store(uint64(caps))
	}
	var need DeviceCap
	if access&AccessFlushGlobal != 0 {
		need |= DeviceCapFlushGlobal
	}
	if access&AccessFlushPersistent != 0 {
		need |= DeviceCapFlushPersistent
	}
	switch {
	case caps.Has(need):
		return nil
	case c.dev.DriverID == uapi.RDMA_DRIVER_RXE:
		return errs.NewUnsupported("rxe flush access (AccessFlushGlobal, AccessFlushPersistent)", "6.2", unix.EOPNOTSUPP)
	}
	return fmt.Errorf("flush access: the device lacks %v: %w", need&^caps, ErrNotSupported)
}
