package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRpingFill holds the ping data to rping.c's client loop: "rdma-ping-%d: "
// by snprintf, then letters from the ping's start letter, 'A' (65) to
// 'z' (122) and round again, a NUL in the last byte, and the start letter
// one further each ping.
func TestRpingFill(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ping      int
		start     byte
		size      int
		want      string
		wantStart byte
	}{
		{"first ping", 0, 'A', 30, "rdma-ping-0: ABCDEFGHIJKLMNOP\x00", 'B'},
		{"second ping", 1, 'B', 30, "rdma-ping-1: BCDEFGHIJKLMNOPQ\x00", 'C'},
		{"letters wrap after z", 57, 'x', 30, "rdma-ping-57: xyzABCDEFGHIJKL\x00", 'y'},
		{"the start letter wraps", 57, 'z', 23, "rdma-ping-57: zABCDEFG\x00", 'A'},
		{"the punctuation between Z and a", 25, 'Z', 25, "rdma-ping-25: Z[\\]^_`abc\x00", '['},
		{"the smallest size, the longest number", 2147483647, 'A', 23, "rdma-ping-2147483647: \x00", 'B'},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, tc.size)
			got := rpingFill(b, tc.ping, tc.start)
			if diff := cmp.Diff(tc.want, string(b)); diff != "" {
				t.Errorf("ping data (-want +got):\n%s", diff)
			}
			if got != tc.wantStart {
				t.Errorf("next start %q, want %q", got, tc.wantStart)
			}
		})
	}
	// The default size, as rping -v prints it for ping 0.
	b := make([]byte, rpingSize)
	rpingFill(b, 0, 'A')
	if want := "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"; string(cString(b)) != want {
		t.Errorf("ping 0 at -S 64: %q, want %q", cString(b), want)
	}
}

// TestRpingInfo: struct rping_rdma_info is big-endian be64 buf, be32
// rkey, be32 size.
func TestRpingInfo(t *testing.T) {
	info := rpingInfo{Addr: 0x0102030405060708, RKey: 0x090a0b0c, Size: 64}
	b := make([]byte, rpingInfoLen)
	info.marshal(b)
	want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0, 64}
	if !bytes.Equal(b, want) {
		t.Errorf("marshal: % x, want % x", b, want)
	}
	got, err := parseRpingInfo(b)
	if err != nil || got != info {
		t.Errorf("parse: %+v, %v; want %+v", got, err, info)
	}
	if _, err := parseRpingInfo(b[:15]); err == nil {
		t.Error("parse of 15 bytes: no error")
	}
}

// TestRpingFlags: rping's command line, getopt's grouped letters
// included, and its limits.
func TestRpingFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want *rpingConfig // nil: a usage error
	}{
		{[]string{"-s"}, &rpingConfig{server: true, port: 7174, size: 64}},
		{[]string{"-s", "-a", "192.0.2.1", "-p", "7175", "-C", "100", "-vVd"},
			&rpingConfig{server: true, addr: "192.0.2.1", port: 7175, count: 100, size: 64, verbose: true, validate: true, debug: true}},
		{[]string{"-c", "-a", "192.0.2.1", "-S", "23", "-V"}, &rpingConfig{client: true, addr: "192.0.2.1", port: 7174, size: 23, validate: true}},
		{[]string{"-cv", "-a", "192.0.2.1", "-S", "65535"}, &rpingConfig{client: true, addr: "192.0.2.1", port: 7174, size: 65535, verbose: true}},
		{[]string{"-c"}, nil}, // a client needs -a
		{[]string{"-a", "192.0.2.1"}, nil},
		{[]string{"-s", "-c"}, nil},
		{[]string{"-s", "-S", "22"}, nil},
		{[]string{"-s", "-S", "65536"}, nil},
		{[]string{"-s", "-C", "-1"}, nil},
		{[]string{"-s", "-p", "0"}, nil},
		{[]string{"-s", "extra"}, nil},
		{[]string{"-sx"}, nil},
	} {
		got, ok := rpingFlags(io.Discard, tc.args)
		if ok != (tc.want != nil) {
			t.Errorf("%q: ok %v", tc.args, ok)
			continue
		}
		if ok {
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(rpingConfig{})); diff != "" {
				t.Errorf("%q (-want +got):\n%s", tc.args, diff)
			}
		}
	}
}

// TestRpingHint: without the rdma_ucm module there is no
// /dev/infiniband/rdma_cm, and the error says what to load.
func TestRpingHint(t *testing.T) {
	msg := "rping: create event channel rdma_cm: no such file or directory"
	if got, want := hint(msg), "modprobe rdma_ucm"; !strings.Contains(got, want) {
		t.Errorf("hint(%q) = %q, want %q in it", msg, got, want)
	}
}
