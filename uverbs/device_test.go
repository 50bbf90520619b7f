package uverbs

import (
	"testing"
)

func TestParseGUID(t *testing.T) {
	tests := []struct {
		in      string
		want    GUID
		wantErr bool
	}{
		{"0250:b6ff:fe5d:20f8", 0x0250b6fffe5d20f8, false},
		{"0000:0000:0000:0000\n", 0, false},
		{"FFFF:ffff:ffff:ffff", 0xffffffffffffffff, false},
		{"0250:b6ff:fe5d", 0, true},
		{"0250:b6ff:fe5d:20f8:0000", 0, true},
		{"0250:b6ff:fe5d:2x0f", 0, true},
		{"12345:0:0:0", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseGUID(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseGUID(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseGUID(%q) = %#x, want %#x", tt.in, uint64(got), uint64(tt.want))
			}
			if err == nil {
				if back, _ := ParseGUID(got.String()); back != got {
					t.Errorf("round trip of %q through %q gave %#x", tt.in, got.String(), uint64(back))
				}
			}
		})
	}
}

func FuzzParseGUID(f *testing.F) {
	f.Add("0250:b6ff:fe5d:20f8")
	f.Add("::::")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGUID(s)
		if err == nil {
			if back, err := ParseGUID(g.String()); err != nil || back != g {
				t.Fatalf("%q parsed to %#x, which does not round-trip: %v", s, uint64(g), err)
			}
		}
	})
}
