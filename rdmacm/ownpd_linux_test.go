package rdmacm

import (
	"errors"
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

// TestOwnPD: with Config.OwnPD each connection's QP is on a PD of its
// own, the memory Setup registers on it is closed by Release, and Close
// then deallocates the PD with no error (it would fail with EBUSY under
// a registration); a Config with both PD and OwnPD is refused.
func TestOwnPD(t *testing.T) {
	requireCM(t)
	mem := make([]byte, 4096)
	releases := 0
	mrs := map[*Conn]*uverbs.MR{}
	cfg := &Config{Cap: smallCap, OwnPD: true,
		Setup: func(c *Conn) (err error) {
			mrs[c], err = c.PD().RegMR(mem, uverbs.AccessLocalWrite)
			return err
		},
		Release: func(c *Conn) {
			if err := mrs[c].Close(); err != nil {
				t.Errorf("release: %v", err)
			}
			releases++
		}}
	l := listen(t, 15, cfg)
	c, s := pair(t, l, cfg)
	c2, s2 := pair(t, listen(t, 16, nil), nil)
	if c.PD() == s.PD() || c.PD() == c2.PD() || s.PD() == s2.PD() {
		t.Errorf("PDs: %p %p, shared: %p %p; want the OwnPD ones apart", c.PD(), s.PD(), c2.PD(), s2.PD())
	}
	if c2.PD() != s2.PD() {
		t.Errorf("the shared PD: %p and %p", c2.PD(), s2.PD())
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if releases != 2 { // and Close's nil says the PDs went after them
		t.Errorf("%d releases, want 2", releases)
	}
	if _, err := Dial(timeout(t), l.Addr().String(), &Config{OwnPD: true, PD: c2.PD()}); !errors.Is(err, errInvalid) {
		t.Errorf("OwnPD with PD: %v, want EINVAL", err)
	}
}
