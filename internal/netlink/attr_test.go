package netlink

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuilderRoundTrip(t *testing.T) {
	b := NewBuilder([]byte{1, 2, 3, 4})
	b.String(2, "rxe0")
	b.Uint32(1, 7)
	b.Nested(18, func(b *Builder) { b.String(1, "veth") })
	b.Add(3, nil)
	raw := b.Bytes()
	if len(raw)%4 != 0 {
		t.Fatalf("payload of %d bytes is not 4-byte aligned", len(raw))
	}
	got := ParseAttrs(raw[4:])
	if len(got) != 4 {
		t.Fatalf("got %d attributes, want 4: %+v", len(got), got)
	}
	if got[0].Type != 2 || got[0].String() != "rxe0" {
		t.Errorf("attr 0 = %d %q", got[0].Type, got[0].String())
	}
	if got[1].Type != 1 || got[1].Uint32() != 7 {
		t.Errorf("attr 1 = %d %d", got[1].Type, got[1].Uint32())
	}
	if got[2].Type != 18 { // NLA_F_NESTED is masked off
		t.Errorf("nested attr type = %#x, want 18", got[2].Type)
	}
	// The nested attribute's header follows the 4-byte fixed header, the
	// padded string (12 bytes) and the u32 (8): its type word is at 26.
	if flags := binary.NativeEndian.Uint16(raw[26:]); flags&nlaFNested == 0 {
		t.Errorf("nested attr lacks NLA_F_NESTED: %#x", flags)
	}
	inner := ParseAttrs(got[2].Data)
	if diff := cmp.Diff([]Attr{{Type: 1, Data: []byte("veth\x00")}}, inner); diff != "" {
		t.Errorf("nested (-want +got):\n%s", diff)
	}
	if got[3].Type != 3 || len(got[3].Data) != 0 || got[3].Uint32() != 0 || got[3].Uint64() != 0 || got[3].Uint8() != 0 {
		t.Errorf("empty attr = %+v", got[3])
	}
}

func TestParseAttrsMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"short":         {1, 0},
		"length < 4":    {2, 0, 1, 0},
		"length > data": {40, 0, 1, 0, 0, 0, 0, 0},
	} {
		if got := ParseAttrs(b); len(got) != 0 {
			t.Errorf("%s: parsed %+v", name, got)
		}
	}
}

func FuzzParseAttrs(f *testing.F) {
	b := NewBuilder(nil)
	b.String(2, "rxe0")
	b.Nested(3, func(b *Builder) { b.Uint32(1, 1) })
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, a := range ParseAttrs(data) {
			_ = a.String()
			_ = a.Uint64()
			ParseAttrs(a.Data)
		}
	})
}
