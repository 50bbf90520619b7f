package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCmtimeFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want *cmtimeConfig // nil: a usage error
	}{
		{"server by default", nil, &cmtimeConfig{conns: 100, port: 7471}},
		{"server on an address", []string{"-b", "192.0.2.1", "-p", "7000"}, &cmtimeConfig{bind: "192.0.2.1", conns: 100, port: 7000}},
		{"client", []string{"-s", "192.0.2.1", "-c", "20"}, &cmtimeConfig{server: "192.0.2.1", conns: 20, port: 7471}},
		{"client on the low level", []string{"-steps", "-s", "192.0.2.1"}, &cmtimeConfig{server: "192.0.2.1", conns: 100, port: 7471, steps: true}},
		{"server given -steps", []string{"-steps", "-b", "192.0.2.1"}, &cmtimeConfig{bind: "192.0.2.1", conns: 100, port: 7471, steps: true}},
		{"both sides", []string{"-s", "192.0.2.1", "-b", "192.0.2.1"}, nil},
		{"no connections", []string{"-s", "192.0.2.1", "-c", "0"}, nil},
		{"a port too large", []string{"-p", "65536"}, nil},
		{"an argument", []string{"192.0.2.1"}, nil},
		{"cmtime's -r, which goverbs lacks", []string{"-r", "2"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errOut bytes.Buffer
			got, ok := cmtimeFlags(&errOut, tc.args)
			if ok != (tc.want != nil) {
				t.Fatalf("ok %v (stderr %q)", ok, errOut.String())
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(cmtimeConfig{})); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCmtimeReport: the rows as cmtime prints its own (make bench reads
// both alike), then the sum per connection.
func TestCmtimeReport(t *testing.T) {
	steps := []cmtimeStep{{name: "connect"}, {name: "disconnect"}}
	steps[0].total = 250 * time.Millisecond
	for _, d := range []time.Duration{20 * time.Millisecond, 3500 * time.Microsecond, 240 * time.Millisecond} {
		steps[0].add(d)
	}
	steps[1].total = 50 * time.Millisecond
	steps[1].add(1200 * time.Microsecond)
	var out bytes.Buffer
	cmtimeReport(&out, steps, 100)
	want := "step              total ms     max ms     min us  us / conn\n" +
		"connect      :      250.00     240.00    3500.00    2500.00\n" +
		"disconnect   :       50.00       1.20    1200.00     500.00\n" +
		"100 connections: 3000.00 us per connection, setup and teardown\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}
