package ucma

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var cmpSockaddr = cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })

// TestSockaddrRoundTrip writes addresses of every family as the kernel
// reads them and reads them back.
func TestSockaddrRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Sockaddr
		size int
	}{
		{"IPv4", IPSockaddr(netip.MustParseAddrPort("192.0.2.1:7471")), 16},
		{"IPv4 any", IPSockaddr(netip.MustParseAddrPort("0.0.0.0:0")), 16},
		{"IPv6", IPSockaddr(netip.MustParseAddrPort("[2001:db8::1]:7174")), 28},
		// A scope no interface has stays a number; the loopback's (1,
		// in every network namespace) reads back as its name, as package
		// net names zones.
		{"IPv6 link-local with scope", IPSockaddr(netip.MustParseAddrPort("[fe80::1%999999]:1")), 28},
		{"IPv6 link-local on lo", IPSockaddr(netip.MustParseAddrPort("[fe80::1%lo]:1")), 28},
		{"IPv4-mapped IPv6", IPSockaddr(netip.MustParseAddrPort("[::ffff:192.0.2.1]:7471")), 28},
		{"InfiniBand", Sockaddr{Family: AF_IB, IB: IBSockaddr{PKey: 0x8001, FlowInfo: 0x12345,
			GID: [16]byte{0xfe, 0x80, 8: 0x02, 0x02, 0xc9, 0xff, 0xfe, 0x01, 0x02, 0x03},
			SID: 0x0000000001060000 | 7471, SIDMask: 0xffffffffffffffff, ScopeID: 1}}, 48},
		{"none", Sockaddr{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if z := c.in.IP.Addr().Zone(); z == "lo" {
				if _, err := net.InterfaceByName(z); err != nil {
					t.Skipf("package net finds no interfaces here (qemu-user's netlink): %v", err)
				}
			}
			b := make([]byte, sizeofStorage)
			n, err := putSockaddr(b, c.in)
			if err != nil {
				t.Fatal(err)
			}
			if n != c.size {
				t.Errorf("size %d, want %d", n, c.size)
			}
			got, err := parseSockaddr(b[:n])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.in, got, cmpSockaddr); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIPSockaddr(t *testing.T) {
	for s, fam := range map[string]uint16{
		"192.0.2.1:1":          AF_INET,
		"[::1]:1":              AF_INET6,
		"[::ffff:192.0.2.1]:1": AF_INET6,
	} {
		if got := IPSockaddr(netip.MustParseAddrPort(s)).Family; got != fam {
			t.Errorf("IPSockaddr(%s).Family = %d, want %d", s, got, fam)
		}
	}
	if got := IPSockaddr(netip.AddrPort{}); got != (Sockaddr{}) {
		t.Errorf("IPSockaddr of nothing = %+v", got)
	}
}

func TestSockaddrString(t *testing.T) {
	for _, c := range []struct {
		in   Sockaddr
		want string
	}{
		{IPSockaddr(netip.MustParseAddrPort("192.0.2.1:7471")), "192.0.2.1:7471"},
		{IPSockaddr(netip.MustParseAddrPort("[fe80::1%2]:7471")), "[fe80::1%2]:7471"},
		{Sockaddr{Family: AF_IB, IB: IBSockaddr{PKey: 0xffff, GID: [16]byte{0xfe, 0x80, 15: 2}, SID: 0x1060000}}, "ib:fe80::2/ffff/0x1060000"},
		{Sockaddr{}, "none"},
		{Sockaddr{Family: 99}, "family 99"},
	} {
		if got := c.in.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

// TestParseSockaddrShort checks that an address cut shorter than its
// family's is an error, and no address at all is none.
func TestParseSockaddrShort(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"empty", nil, true},
		{"one byte", []byte{2}, true},
		{"family 0", make([]byte, 16), true},
		{"AF_INET of 15", le16(AF_INET, 15), false},
		{"AF_INET6 of 27", le16(AF_INET6, 27), false},
		{"AF_IB of 28", le16(AF_IB, 28), false},
		{"AF_UNIX", le16(1, 110), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseSockaddr(c.b)
			if (err == nil) != c.ok {
				t.Errorf("error %v, want ok %v", err, c.ok)
			}
		})
	}
	if _, err := putSockaddr(make([]byte, 27), IPSockaddr(netip.MustParseAddrPort("[::1]:1"))); err == nil {
		t.Error("an IPv6 address fit in 27 bytes")
	}
}

// le16 is n bytes starting with family in host order.
func le16(family uint16, n int) []byte {
	b := make([]byte, n)
	ne.PutUint16(b, family)
	return b
}
