package rdmanet_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/goverbs/goverbs/rdmanet"
)

// A Token's text form parses back to it, and is compact.
func TestTokenText(t *testing.T) {
	for _, tok := range []rdmanet.Token{
		{},
		{Addr: 0x7f3a5c200000, Len: 0x10000, RKey: 0x1a2b},
		{Addr: 1, Len: math.MaxUint64 - 1, RKey: math.MaxUint32},
		{Addr: math.MaxUint64, Len: 0, RKey: 7},
	} {
		s := tok.String()
		got, err := rdmanet.ParseToken(s)
		if err != nil || got != tok {
			t.Errorf("ParseToken(%q) = %+v, %v; want %+v", s, got, err, tok)
		}
	}
	if s := (rdmanet.Token{Addr: 0x7f3a5c200000, Len: 0x10000, RKey: 0x1a2b}).String(); s != "7f3a5c200000:10000:1a2b" {
		t.Errorf("String = %q", s)
	}
}

// ParseToken refuses anything String does not write, and a range that
// wraps around the address space.
func TestParseTokenErrors(t *testing.T) {
	for _, s := range []string{
		"", "1:2", "1:2:3:4", ":2:3", "1::3", "1:2:", "0x1:2:3", "-1:2:3", "+1:2:3",
		"1_0:2:3", "g:2:3", "1:2:100000000", "10000000000000000:0:0", " 1:2:3",
		"ffffffffffffffff:2:3", // wraps
	} {
		if tok, err := rdmanet.ParseToken(s); err == nil {
			t.Errorf("ParseToken(%q) = %+v, want an error", s, tok)
		}
	}
}

// A Token encodes as its text form in JSON, and back.
func TestTokenJSON(t *testing.T) {
	tok := rdmanet.Token{Addr: 0x1000, Len: 4096, RKey: 42}
	b, err := json.Marshal(struct{ T rdmanet.Token }{tok})
	if err != nil || string(b) != `{"T":"1000:1000:2a"}` {
		t.Fatalf("json.Marshal = %s, %v", b, err)
	}
	var v struct{ T rdmanet.Token }
	if err := json.Unmarshal(b, &v); err != nil || v.T != tok {
		t.Fatalf("json.Unmarshal = %+v, %v", v.T, err)
	}
	if err := json.Unmarshal([]byte(`{"T":"x"}`), &v); err == nil {
		t.Error("json.Unmarshal of a bad token succeeded")
	}
}

func FuzzParseToken(f *testing.F) {
	f.Add("7f3a5c200000:10000:1a2b")
	f.Add("0:0:0")
	f.Add("ffffffffffffffff:1:0")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := rdmanet.ParseToken(s)
		if err != nil {
			return
		}
		if tok.Addr+tok.Len < tok.Addr {
			t.Fatalf("ParseToken(%q) = %+v: wraps", s, tok)
		}
		again, err := rdmanet.ParseToken(tok.String())
		if err != nil || again != tok {
			t.Fatalf("ParseToken(%q).String() = %q parses to %+v, %v", s, tok.String(), again, err)
		}
	})
}
