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
		name, want string
		args       []string
	}{
		{"send_lat", "t_typical[usec]", []string{"-t", "send_lat", "-s", "64"}},
		{"write_lat", "99% percentile[usec]", []string{"-t", "write_lat", "-s", "64"}},
		{"send_bw", "BW average[MB/sec]", []string{"-t", "send_bw", "-s", "64"}},
		{"write_bw", "MsgRate[Mpps]", []string{"-t", "write_bw", "-s", "64"}},
		// Sent inline (-I), as perftest does on devices it knows.
		{"send_lat_inline", "t_typical[usec]", []string{"-t", "send_lat", "-s", "64", "-I", "64"}},
		{"write_lat_inline", "t_typical[usec]", []string{"-t", "write_lat", "-s", "64", "-I", "128"}},
		{"send_bw_inline", "MsgRate[Mpps]", []string{"-t", "send_bw", "-s", "64", "-I", "64"}},
		// Over 8 KiB every send is signaled unless -Q says otherwise.
		{"send_bw_16k", "MsgRate[Mpps]", []string{"-t", "send_bw", "-s", "16384"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := run(t, perf, perf, append(tc.args, "-n", "500"))
			if !strings.Contains(cli, tc.want) {
				t.Errorf("client output lacks %q:\n%s", tc.want, cli)
			}
			t.Logf("server: %s\nclient:\n%s", strings.TrimSpace(srv), cli)
		})
	}
}
