//go:build !linux

package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/rdmacm"
)

// On a system without the rdma_cm every entry point fails with an
// *OpError that wraps ErrNotSupported, and no method panics, on nil
// receivers alike.
func TestUnsupportedOS(t *testing.T) {
	ctx := context.Background()
	var (
		ch   *rdmacm.EventChannel
		id   *rdmacm.ID
		c    *rdmacm.Conn
		l    *rdmacm.Listener
		r    *rdmacm.Request
		ev   = new(rdmacm.Event)
		addr = netip.MustParseAddrPort("192.0.2.1:7471")
	)
	calls := map[string]func() error{
		"dial":         func() error { _, err := rdmacm.Dial(ctx, addr.String(), nil); return err },
		"listen":       func() error { _, err := rdmacm.Listen(ctx, addr.String(), nil); return err },
		"dial ud":      func() error { _, err := rdmacm.DialUD(ctx, addr.String(), nil); return err },
		"listen ud":    func() error { _, err := rdmacm.ListenUD(ctx, addr.String(), nil); return err },
		"new channel":  func() error { _, err := rdmacm.NewEventChannel(); return err },
		"channel wait": func() error { _, err := ch.Wait(ctx); return err },
		"new id":       func() error { _, err := ch.NewID(rdmacm.PortSpaceTCP); return err },
		"ack":          ev.Ack,
		"bind":         func() error { return id.Bind(addr) },
		"connect":      func() error { return id.Connect(nil) },
		"id close":     id.Close,
		"conn close":   c.Close,
		"accept":       func() error { _, err := l.Accept(ctx); return err },
		"reject":       func() error { return r.Reject(nil) },
	}
	for name, call := range calls {
		err := call()
		var oe *rdmacm.OpError
		if !errors.Is(err, rdmacm.ErrNotSupported) || !errors.As(err, &oe) {
			t.Errorf("%s: %v, want an *OpError wrapping ErrNotSupported", name, err)
		}
	}
	if c.QP() != nil || c.PD() != nil || l.Addr().IsValid() || r.PrivateData() != nil {
		t.Error("a stub accessor returned something")
	}
}
