//go:build !linux

package main

import (
	"bytes"
	"io"
	"runtime"
	"testing"
)

// Off Linux every command that needs RDMA fails with status 1 and one
// line that names the command and the system; usage errors stay 2.
func TestUnsupportedCommands(t *testing.T) {
	for _, tt := range []struct {
		name   string
		run    func(stdout, stderr io.Writer) int
		status int
		want   string
	}{
		{"devinfo", func(o, e io.Writer) int { return devinfoTo(o, e, nil) }, 1,
			"goverbs: devinfo: RDMA verbs are not supported on " + runtime.GOOS + "\n"},
		{"link", func(o, e io.Writer) int { return linkTo(o, e, []string{"show"}) }, 1,
			"goverbs: link: RDMA verbs are not supported on " + runtime.GOOS + "\n"},
		{"perf", func(_, e io.Writer) int { return unsupportedTo(e, "perf") }, 1,
			"goverbs: perf: RDMA verbs are not supported on " + runtime.GOOS + "\n"},
		{"link usage", func(o, e io.Writer) int { return linkTo(o, e, []string{"frob"}) }, 2, ""},
		{"res", func(o, e io.Writer) int { return resTo(o, e, []string{"show", "qp"}) }, 1,
			"goverbs: res: RDMA verbs are not supported on " + runtime.GOOS + "\n"},
		{"res usage", func(o, e io.Writer) int { return resTo(o, e, []string{"show", "qp", "x"}) }, 2, ""},
		{"stat", func(o, e io.Writer) int { return statTo(o, e, nil) }, 1,
			"goverbs: stat: RDMA verbs are not supported on " + runtime.GOOS + "\n"},
		{"stat usage", func(o, e io.Writer) int { return statTo(o, e, []string{"qp"}) }, 2, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := tt.run(&out, &errOut); got != tt.status {
				t.Errorf("status %d, want %d (stderr %q)", got, tt.status, errOut.String())
			}
			if tt.want != "" && errOut.String() != tt.want {
				t.Errorf("stderr %q, want %q", errOut.String(), tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing", out.String())
			}
		})
	}
	for _, name := range []string{"devices", "devinfo", "link", "pingpong", "perf", "rping", "cmtime", "res", "stat"} {
		if _, ok := commands[name]; !ok {
			t.Errorf("command %s is not registered", name)
		}
	}
}
