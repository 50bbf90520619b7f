package provider

import (
	"testing"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/transport"
)

type fakeDriver struct{ name string }

func (d fakeDriver) Name() string          { return d.name }
func (fakeDriver) FWVersion(uint64) string { return "" }
func (fakeDriver) Open(*transport.Conn, int) (Context, kverbs.Context, error) {
	return nil, kverbs.Context{AsyncFD: -1}, nil
}

// TestRegister: a registered driver is found by its id, no other id finds
// it, and a second registration of the id, or of a nil driver, panics.
func TestRegister(t *testing.T) {
	const id, other uint32 = 0xfffffff0, 0xfffffff1 // no enum rdma_driver_id is near
	if _, ok := Lookup(id); ok {
		t.Fatalf("Lookup(%#x) found a driver before Register", id)
	}
	Register(id, fakeDriver{"first"})
	if d, ok := Lookup(id); !ok || d.Name() != "first" {
		t.Errorf("Lookup(%#x) = %v, %v; want the registered driver", id, d, ok)
	}
	if d, ok := Lookup(other); ok {
		t.Errorf("Lookup(%#x) = %v; want none", other, d)
	}
	panics := func(what string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", what)
			}
		}()
		f()
	}
	panics("a second Register", func() { Register(id, fakeDriver{"second"}) })
	panics("Register(nil)", func() { Register(other, nil) })
	if d, _ := Lookup(id); d.Name() != "first" {
		t.Errorf("after the refused Register, Lookup(%#x) = %q; want the first driver", id, d.Name())
	}
	if _, ok := Lookup(other); ok {
		t.Errorf("the refused Register(nil) left a driver at %#x", other)
	}
}
