package rdmanet

import (
	"bytes"
	"errors"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []header{{kindData, 1, 0}, {kindCredit, 0, 7}, {kindFin, 0, maxCredits}, {kindData, maxMsgSlots, 1}} {
		got, err := parseImm(h.imm())
		if err != nil || got != h {
			t.Errorf("parseImm(%#x) = %+v, %v; want %+v", h.imm(), got, err, h)
		}
	}
	for _, imm := range []uint32{0, 4 << immKindShift, 0xf0000000, kindData << immKindShift, kindCredit<<immKindShift | 1<<16} {
		if _, err := parseImm(imm); !errors.Is(err, errProtocol) {
			t.Errorf("parseImm(%#x): %v, want a protocol error", imm, err)
		}
	}
}

func TestHelloRoundTrip(t *testing.T) {
	h := hello{credits: 8, bufSize: 16 << 10, rkey: 0x1234, ringAddr: 0x7f0012345000}
	b := append(h.marshal(), make([]byte, 32)...) // the CM's padding
	if got, err := parseHello(b); err != nil || got != h {
		t.Errorf("parseHello = %+v, %v; want %+v", got, err, h)
	}
	for _, bad := range [][]byte{nil, b[:helloSize-1], bytes.Repeat([]byte{0}, 56), append([]byte("RNET\x01"), b[5:]...),
		hello{credits: 1, bufSize: 1}.marshal(), hello{credits: 2, bufSize: 0}.marshal(), hello{credits: maxCredits, bufSize: 1 << 31}.marshal()} {
		if _, err := parseHello(bad); !errors.Is(err, errProtocol) {
			t.Errorf("parseHello(%q): %v, want a protocol error", bad, err)
		}
	}
}

// FuzzParseWire: no header or hello, however malformed, panics; what
// parses packs back to the same bytes.
func FuzzParseWire(f *testing.F) {
	f.Add(uint32(kindData<<immKindShift|2<<immSlotsShift|3), hello{credits: 8, bufSize: 4096, rkey: 7, ringAddr: 1 << 20}.marshal())
	f.Add(uint32(0xffffffff), []byte("RNET"))
	f.Fuzz(func(t *testing.T, imm uint32, b []byte) {
		if h, err := parseImm(imm); err == nil && h.imm() != imm {
			t.Errorf("header %#x parses to %+v, which packs to %#x", imm, h, h.imm())
		}
		if h, err := parseHello(b); err == nil && !bytes.Equal(h.marshal(), b[:helloSize]) {
			t.Errorf("hello %x parses to %+v, which packs to %x", b[:helloSize], h, h.marshal())
		}
	})
}
