package main

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
)

// The program, run as its main would, from the first RoCE v2 GID (IPv6
// link-local on rxe) and from the IPv4 one: it must succeed in the VM.
func TestRun(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	for _, c := range []struct {
		name string
		addr netip.Addr
		from string
	}{{"first", netip.Addr{}, "(IPv6)"}, {"ipv4", netip.MustParseAddr("192.0.2.1"), "from 192.0.2.1 "}} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(&out, "rxe0", c.addr, 3)
			t.Logf("output:\n%s", &out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "3 pings answered") || !strings.Contains(out.String(), c.from) {
				t.Errorf("output lacks %q or its last line", c.from)
			}
		})
	}
}
