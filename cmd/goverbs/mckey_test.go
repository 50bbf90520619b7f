package main

import (
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMckeyFlags: mckey's command line, its defaults and limits.
func TestMckeyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want *mckeyConfig // nil: a usage error
	}{
		{[]string{"-m", "239.1.2.3", "-b", "192.0.2.1"}, &mckeyConfig{group: "239.1.2.3", bind: "192.0.2.1", count: 10, size: 100}},
		{[]string{"-so", "-m", "239.1.2.3", "-b", "192.0.2.1", "-C", "5", "-S", "64"},
			&mckeyConfig{group: "239.1.2.3", bind: "192.0.2.1", sender: true, sendOnly: true, count: 5, size: 64}},
		{[]string{"-m", "239.1.2.3"}, nil}, // -b is needed
		{[]string{"-b", "192.0.2.1"}, nil},
		{[]string{"-o", "-m", "239.1.2.3", "-b", "192.0.2.1"}, nil}, // send-only, receiving
		{[]string{"-m", "239.1.2.3", "-b", "192.0.2.1", "-C", "-1"}, nil},
		{[]string{"-m", "239.1.2.3", "-b", "192.0.2.1", "-S", "4097"}, nil},
		{[]string{"-m", "239.1.2.3", "-b", "192.0.2.1", "extra"}, nil},
	} {
		got, ok := mckeyFlags(io.Discard, tc.args)
		if ok != (tc.want != nil) {
			t.Errorf("%q: ok %v", tc.args, ok)
			continue
		}
		if ok {
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(mckeyConfig{})); diff != "" {
				t.Errorf("%q (-want +got):\n%s", tc.args, diff)
			}
		}
	}
}
