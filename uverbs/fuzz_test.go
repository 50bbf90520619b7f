package uverbs_test

import (
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

// FuzzParseEndpoint reads any bytes as an Endpoint's text (a peer's
// message, such as ibv_rc_pingpong's 52-byte C string). What it accepts
// has 24-bit QPN and PSN and a valid or no MTU, and reads back the same
// from the text MarshalText gives it.
func FuzzParseEndpoint(f *testing.F) {
	gid := uverbs.GID{0xfe, 0x80, 15: 1}
	for _, e := range []uverbs.Endpoint{
		{QPN: 0x11, PSN: 0xabcdef, GID: gid},
		{LID: 0xffff, QPN: 0xffffff},
		{QPN: 1, PSN: 2, GID: gid, MTU: uverbs.MTU4096, Addr: 0x7f0000001000, RKey: 0x1234},
	} {
		b, _ := e.MarshalText()
		f.Add(append(b, 0))
	}
	f.Add([]byte("0000:000011:abcdef:fe800000000000000000000000000001\x00"))
	f.Add([]byte("0000:000011:abcdef:FE800000000000000000000000000001")) // no NUL, upper case
	f.Add([]byte("0000:1000000:00000:fe800000000000000000000000000001\x00"))
	f.Add([]byte("+0:0x11:-1:fe80000000000000000000000000000g\x00"))
	f.Add([]byte("0:1:2:fe800000000000000000000000000001:1000:0:0"))
	f.Add([]byte("done\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e uverbs.Endpoint
		if err := e.UnmarshalText(b); err != nil {
			return
		}
		if e.QPN > 0xffffff || e.PSN > 0xffffff || (e.MTU != 0 && e.MTU.Bytes() == 0) {
			t.Fatalf("%q accepted as %+v", b, e)
		}
		w, err := e.MarshalText()
		if err != nil {
			t.Fatalf("%q read as %+v, which MarshalText refuses: %v", b, e, err)
		}
		if e.MTU == 0 && e.Addr == 0 && e.RKey == 0 && len(w) != uverbs.EndpointTextLen {
			t.Fatalf("%+v written as %q: not ibv_rc_pingpong's %d bytes", e, w, uverbs.EndpointTextLen)
		}
		var back uverbs.Endpoint
		if err := back.UnmarshalText(w); err != nil || back != e {
			t.Fatalf("%q read as %+v, written as %q, read back as %+v, %v", b, e, w, back, err)
		}
	})
}

// FuzzEndpointRoundTrip writes any endpoint and reads it back: the same
// endpoint for what the text can carry, and an error, never another
// endpoint, for a QPN or PSN wider than 24 bits or an MTU that is not one.
func FuzzEndpointRoundTrip(f *testing.F) {
	f.Add(uint16(1), uint32(0x11), uint32(0xabcdef), []byte{0xfe, 0x80, 15: 1}, uint8(0), uint64(0), uint32(0))
	f.Add(uint16(0xffff), uint32(0x1000000), uint32(0), []byte{}, uint8(3), uint64(1), uint32(2))
	f.Add(uint16(0), uint32(0), uint32(0), []byte{}, uint8(6), uint64(0), uint32(0))
	f.Fuzz(func(t *testing.T, lid uint16, qpn, psn uint32, g []byte, mtu uint8, addr uint64, rkey uint32) {
		e := uverbs.Endpoint{LID: lid, QPN: qpn, PSN: psn, MTU: uverbs.MTU(mtu), Addr: addr, RKey: rkey}
		copy(e.GID[:], g)
		w, err := e.MarshalText()
		switch {
		case qpn > 0xffffff || psn > 0xffffff || (mtu != 0 && e.MTU.Bytes() == 0):
			if err == nil {
				t.Fatalf("%+v, which the text cannot carry, written as %q", e, w)
			}
			return
		case err != nil:
			t.Fatalf("%+v: %v", e, err)
		}
		var back uverbs.Endpoint
		if err := back.UnmarshalText(w); err != nil || back != e {
			t.Fatalf("%+v written as %q, read back as %+v, %v", e, w, back, err)
		}
	})
}

// FuzzParseGRH reads any receive buffer's first 40 bytes as a GRH: no
// panic; an IPv4 reading has IPv4-mapped GIDs and no flow label.
func FuzzParseGRH(f *testing.F) {
	f.Add(make([]byte, 40))
	f.Add(append([]byte{0x60, 0, 0, 1, 0, 0x40, 0x1b, 0x40, 0xfe, 0x80}, make([]byte, 30)...))
	f.Add(append(make([]byte, 20), 0x45, 0, 0, 0x64, 0, 0, 0x40, 0, 0x40, 0x11, 0x71, 0x33, 192, 0, 2, 1, 192, 0, 2, 2))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := uverbs.ParseGRH(b)
		if err != nil {
			return
		}
		switch g.IPVersion {
		case 4:
			if !g.Src().Is4() || !g.Dst().Is4() || g.FlowLabel != 0 {
				t.Fatalf("%x read as IPv4 %+v", b, g)
			}
		case 6:
			if g.FlowLabel > 0xfffff {
				t.Fatalf("%x: flow label %#x", b, g.FlowLabel)
			}
		default:
			t.Fatalf("%x read as IP version %d", b, g.IPVersion)
		}
	})
}
