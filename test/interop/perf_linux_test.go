package interop

import (
	"strings"
	"testing"
)

// goverbs perf, client against server, for each test: both sides finish
// and the client reports the figures perftest reports.
func TestPerf(t *testing.T) {
	tools(t, false) // skips outside the VM
	perf := tool{"goverbs", []string{goverbsBin, "perf"}, nil}
	for _, tc := range []struct {
		test, want string
	}{
		{"send_lat", "t_typical[usec]"},
		{"write_lat", "99% percentile[usec]"},
		{"send_bw", "BW average[MB/sec]"},
		{"write_bw", "MsgRate[Mpps]"},
	} {
		t.Run(tc.test, func(t *testing.T) {
			srv, cli := run(t, perf, perf, []string{"-t", tc.test, "-s", "64", "-n", "500"})
			if !strings.Contains(cli, tc.want) {
				t.Errorf("client output lacks %q:\n%s", tc.want, cli)
			}
			t.Logf("server: %s\nclient:\n%s", strings.TrimSpace(srv), cli)
		})
	}
}
