package netlink

import (
	"encoding/binary"
	"strings"
)

// Attr is one netlink attribute (struct nlattr and its payload).
type Attr struct {
	Type uint16 // with NLA_F_NESTED and NLA_F_NET_BYTEORDER cleared
	Data []byte
}

const attrTypeMask = 0x3fff // ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER)

// ParseAttrs splits b into attributes. It never panics: a truncated or
// malformed tail is ignored.
func ParseAttrs(b []byte) []Attr {
	var out []Attr
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:]))
		typ := binary.NativeEndian.Uint16(b[2:])
		if l < 4 || l > len(b) {
			break
		}
		out = append(out, Attr{Type: typ & attrTypeMask, Data: b[4:l]})
		b = b[min(align4(l), len(b)):]
	}
	return out
}

// String returns the attribute as a NUL-terminated string.
func (a Attr) String() string {
	s, _, _ := strings.Cut(string(a.Data), "\x00")
	return s
}

// Uint32 returns a host-endian u32 attribute, or 0 if it is too short.
func (a Attr) Uint32() uint32 {
	if len(a.Data) < 4 {
		return 0
	}
	return binary.NativeEndian.Uint32(a.Data)
}

// Uint64 returns a host-endian u64 attribute, or 0 if it is too short.
func (a Attr) Uint64() uint64 {
	if len(a.Data) < 8 {
		return 0
	}
	return binary.NativeEndian.Uint64(a.Data)
}

// Uint8 returns a u8 attribute, or 0 if it is empty.
func (a Attr) Uint8() uint8 {
	if len(a.Data) < 1 {
		return 0
	}
	return a.Data[0]
}

// Builder appends attributes to a message payload.
type Builder struct {
	b []byte
}

// NewBuilder starts a payload with a fixed header (ifinfomsg, genlmsghdr,
// …); hdr may be nil.
func NewBuilder(hdr []byte) *Builder {
	return &Builder{b: append([]byte(nil), hdr...)}
}

// Bytes returns the payload built so far.
func (b *Builder) Bytes() []byte { return b.b }

// Add appends an attribute with the given payload.
func (b *Builder) Add(typ uint16, data []byte) {
	l := 4 + len(data)
	var h [4]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(l))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b.b = append(b.b, h[:]...)
	b.b = append(b.b, data...)
	for len(b.b)%4 != 0 {
		b.b = append(b.b, 0)
	}
}

// String appends a NUL-terminated string attribute.
func (b *Builder) String(typ uint16, s string) { b.Add(typ, append([]byte(s), 0)) }

// Uint32 appends a host-endian u32 attribute.
func (b *Builder) Uint32(typ uint16, v uint32) {
	b.Add(typ, binary.NativeEndian.AppendUint32(nil, v))
}

// Nested appends an attribute whose payload is what fn adds, flagged
// NLA_F_NESTED.
func (b *Builder) Nested(typ uint16, fn func(*Builder)) { b.Wrap(typ|nlaFNested, fn) }

// Wrap appends an attribute whose payload is what fn adds, as it is: a
// struct, then attributes, as tc's TCA_OPTIONS carries them (without
// NLA_F_NESTED, which tc does not set there).
func (b *Builder) Wrap(typ uint16, fn func(*Builder)) {
	start := len(b.b)
	b.b = append(b.b, 0, 0, 0, 0)
	fn(b)
	binary.NativeEndian.PutUint16(b.b[start:], uint16(len(b.b)-start))
	binary.NativeEndian.PutUint16(b.b[start+2:], typ)
}

const nlaFNested = 1 << 15

func align4(n int) int { return (n + 3) &^ 3 }
