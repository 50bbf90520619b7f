package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestStreamUnits(t *testing.T) {
	for n, want := range map[int64]string{1: "1", 64: "64", 1000: "1000", 1024: "1k", 1536: "1.5k", 4096: "4k",
		10 << 10: "10k", 65536: "64k", 1 << 20: "1m", 3 << 19: "1.5m", 12 << 20: "12m", 1 << 30: "1g"} {
		if got := sizeStr(n); got != want {
			t.Errorf("sizeStr(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{1: "1", 999: "999", 1000: "1k", 100000: "100k", 1999999: "1m", 3e9: "3b"} {
		if got := cntStr(n); got != want {
			t.Errorf("cntStr(%d) = %q, want %q", n, got, want)
		}
	}
}

// The report is rstream's, column for column.
func TestStreamReport(t *testing.T) {
	var b bytes.Buffer
	streamHeader(&b)
	streamRow(&b, streamTest{"64_lat", 64, 1, 100000}, 2*time.Second)
	want := "name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer\n" +
		"64_lat    64      1       100k    12m         2.00s      0.05      10.00\n"
	if b.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestStreamFlags(t *testing.T) {
	c, ok := streamFlags(io.Discard, []string{"-s", "192.0.2.1", "-S", "64k", "-C", "10"})
	if !ok || !c.custom || c.size != 64<<10 || c.count != 10 || c.iters != 1 || c.server != "192.0.2.1" {
		t.Fatalf("custom flags: %+v, %t", c, ok)
	}
	if lat, bw := streamTests(c); len(lat) != 1 || bw != nil || lat[0] != (streamTest{"custom", 64 << 10, 10, 1}) {
		t.Errorf("custom tests: %v, %v", lat, bw)
	}
	c, ok = streamFlags(io.Discard, []string{"-T", "s"})
	if !ok || c.custom || !c.tcp || c.port != streamPort {
		t.Fatalf("default flags: %+v, %t", c, ok)
	}
	lat, bw := streamTests(c)
	var names []string
	for _, tt := range append(lat, bw...) {
		names = append(names, tt.name)
	}
	if got := strings.Join(names, " "); got != "64_lat 4k_lat 64k_lat 1m_lat 64_bw 4k_bw 64k_bw 1m_bw" {
		t.Errorf("default tests: %s", got)
	}
	if c, ok := streamFlags(io.Discard, []string{"-S", "all"}); !ok || c.custom {
		t.Errorf("-S all: %+v, %t", c, ok)
	} else if lat, _ := streamTests(c); len(lat) != len(streamSizes) {
		t.Errorf("-S all: %d tests, want %d", len(lat), len(streamSizes))
	}
	for _, bad := range [][]string{{"-s", "a", "-b", "b"}, {"-S", "x"}, {"-C", "0"}, {"-T", "q"}, {"-p", "0"}, {"extra"}} {
		if _, ok := streamFlags(io.Discard, bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}
