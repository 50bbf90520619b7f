package uverbs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uverbs"
)

func TestEndpointText(t *testing.T) {
	gid := uverbs.GID{0xfe, 0x80, 15: 1}
	for _, c := range []struct {
		name string
		e    uverbs.Endpoint
		text string
	}{
		{"pingpong", uverbs.Endpoint{QPN: 0x11, PSN: 0xabcdef, GID: gid},
			"0000:000011:abcdef:fe800000000000000000000000000001"},
		{"ib", uverbs.Endpoint{LID: 0xffff, QPN: 0xffffff},
			"ffff:ffffff:000000:00000000000000000000000000000000"},
		{"extended", uverbs.Endpoint{LID: 1, QPN: 0x11, PSN: 2, GID: gid, MTU: uverbs.MTU1024, Addr: 0x7f0000001000, RKey: 0x1234},
			"0001:000011:000002:fe800000000000000000000000000001:1024:00007f0000001000:00001234"},
		{"rkey only", uverbs.Endpoint{RKey: 1},
			"0000:000000:000000:00000000000000000000000000000000:0:0000000000000000:00000001"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := c.e.MarshalText()
			if err != nil || string(b) != c.text {
				t.Fatalf("MarshalText = %q, %v; want %q", b, err, c.text)
			}
			if s := c.e.String(); s != c.text {
				t.Errorf("String = %q", s)
			}
			var back uverbs.Endpoint
			if err := back.UnmarshalText(append(b, 0, 'x')); err != nil { // a C string: the NUL ends it
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.e, back); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
		})
	}
	if len("0000:000011:abcdef:fe800000000000000000000000000001") != uverbs.EndpointTextLen {
		t.Errorf("EndpointTextLen = %d", uverbs.EndpointTextLen)
	}
}

func TestEndpointTextRefused(t *testing.T) {
	for _, e := range []uverbs.Endpoint{{QPN: 1 << 24}, {PSN: 1 << 24}, {MTU: 9}} {
		if b, err := e.MarshalText(); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%+v: MarshalText = %q, %v; want EINVAL", e, b, err)
		}
	}
	for _, s := range []string{
		"",
		"done\x00",
		"0000:1000000:000000:fe800000000000000000000000000001",
		"+0:11:1:fe800000000000000000000000000001",
		"0:11:1:fe80000000000000000000000000001",   // 31 digits
		"0:11:1:fe80000000000000000000000000000g",  // not hex
		"0:11:1:fe800000000000000000000000000001:", // 5 fields
		"0:11:1:fe800000000000000000000000000001:1000:0:0",
		"0:11:1:fe800000000000000000000000000001:1024:10000000000000000:0",
	} {
		var e uverbs.Endpoint
		if err := e.UnmarshalText([]byte(s)); err == nil {
			t.Errorf("%q read as %+v", s, e)
		}
	}
}

// The endpoint a peer sends, in ibv_rc_pingpong's text, and back.
func ExampleEndpoint() {
	gid, _ := uverbs.ParseGID("::ffff:192.0.2.1")
	local := uverbs.Endpoint{QPN: 0x11, PSN: 0xabcdef, GID: gid}
	text, err := local.MarshalText() // send it to the peer however you like
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(text))
	var remote uverbs.Endpoint
	if err := remote.UnmarshalText(text); err != nil { // what the peer does
		log.Fatal(err)
	}
	fmt.Println(remote.QPN == local.QPN, remote.GID)
	// Output:
	// 0000:000011:abcdef:00000000000000000000ffffc0000201
	// true ::ffff:192.0.2.1
}

// grh6 is a GRH as InfiniBand, RoCE v1 and RoCE v2 over IPv6 write it.
func grh6(tc uint8, flow uint32, hop uint8, src, dst netip.Addr) []byte {
	b := make([]byte, uverbs.GRHSize)
	binary.BigEndian.PutUint32(b, 6<<28|uint32(tc)<<20|flow)
	b[6], b[7] = 0x1b, hop
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return b
}

// grh4 is what a RoCE v2 over IPv4 receive holds: 20 undefined bytes,
// then the IPv4 header.
func grh4(tos, ttl uint8, src, dst netip.Addr, junk byte) []byte {
	b := make([]byte, uverbs.GRHSize)
	for i := range 20 {
		b[i] = junk
	}
	h := b[20:]
	h[0], h[1], h[8], h[9] = 0x45, tos, ttl, 17
	binary.BigEndian.PutUint16(h[2:], 20+8+12+64)
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(h[10:], ^uint16(sum))
	return b
}

func TestParseGRH(t *testing.T) {
	v6a, v6b := netip.MustParseAddr("fe80::1"), netip.MustParseAddr("2001:db8::2")
	v4a, v4b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	mapped := func(a netip.Addr) uverbs.GID { return uverbs.GID(a.As16()) }
	for _, c := range []struct {
		name string
		b    []byte
		want uverbs.GRH
	}{
		{"ipv6", grh6(0x12, 0xabcde, 64, v6a, v6b),
			uverbs.GRH{IPVersion: 6, TrafficClass: 0x12, FlowLabel: 0xabcde, HopLimit: 64, SGID: mapped(v6a), DGID: mapped(v6b)}},
		{"ipv4", grh4(0x10, 63, v4a, v4b, 0),
			uverbs.GRH{IPVersion: 4, TrafficClass: 0x10, HopLimit: 63, SGID: mapped(v4a), DGID: mapped(v4b)}},
		// The undefined first 20 bytes may look like an IPv6 header: the
		// IPv4 header's checksum decides, as in rdma-core.
		{"ipv4 after a 6", grh4(0, 64, v4a, v4b, 0x60),
			uverbs.GRH{IPVersion: 4, HopLimit: 64, SGID: mapped(v4a), DGID: mapped(v4b)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := uverbs.ParseGRH(append(c.b, "payload"...))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if g, _ := uverbs.ParseGRH(grh4(0, 64, v4a, v4b, 0)); g.Src() != v4a || g.Dst() != v4b {
		t.Errorf("IPv4 Src, Dst = %v, %v; want %v, %v", g.Src(), g.Dst(), v4a, v4b)
	}
	if g, _ := uverbs.ParseGRH(grh6(0, 0, 1, v6a, v6b)); g.Src() != v6a {
		t.Errorf("IPv6 Src = %v, want %v", g.Src(), v6a)
	}
	if _, err := uverbs.ParseGRH(make([]byte, 39)); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("39 bytes: %v, want EINVAL", err)
	}
	if _, err := uverbs.ParseGRH(make([]byte, 40)); !errors.Is(err, syscall.EPROTONOSUPPORT) {
		t.Errorf("zeros: %v, want EPROTONOSUPPORT", err)
	}
	if n := uverbs.UDRecvSize(2048); n != 2088 {
		t.Errorf("UDRecvSize(2048) = %d", n)
	}
}

// Who sent a UD datagram: the GRH in the first 40 bytes of the receive
// buffer (here one from RoCE v2 over IPv4).
func ExampleParseGRH() {
	buf := make([]byte, uverbs.UDRecvSize(5)) // post receives this big
	copy(buf, grh4(0, 64, netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("192.0.2.1"), 0))
	copy(buf[uverbs.GRHSize:], "hello")
	grh, err := uverbs.ParseGRH(buf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(grh.Src(), grh.SGID, string(buf[uverbs.GRHSize:]))
	// Output:
	// 192.0.2.7 ::ffff:192.0.2.7 hello
}

// A bad input of any size gives an error of a bounded size: the message
// quotes its first bytes and says how long it was.
func TestEndpointBadTextQuotedShort(t *testing.T) {
	var e uverbs.Endpoint
	err := e.UnmarshalText(bytes.Repeat([]byte("x"), 1<<20))
	if err == nil {
		t.Fatal("1 MiB of x parsed as an endpoint")
	}
	if n := len(err.Error()); n > 200 {
		t.Errorf("the error is %d bytes long: %.120s", n, err)
	}
	if !strings.Contains(err.Error(), "1048576 bytes") {
		t.Errorf("the error does not say how long the input was: %v", err)
	}
}
