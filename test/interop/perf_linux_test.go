package interop

import (
	"strconv"
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
			if strings.Contains(tc.name, "_lat") {
				checkLatRow(t, cli)
			} else {
				checkBWRow(t, cli)
			}
			t.Logf("server: %s\nclient:\n%s", strings.TrimSpace(srv), cli)
		})
	}
}

// checkLatRow checks a latency test's figures for sense, not speed: the
// row under the header has 500 iterations, and its times (t_min, t_max,
// t_typical, t_avg, t_stdev, the 99% and 99.9% percentiles) are positive
// where they must be and in order: min ≤ typical, 99% ≤ 99.9% ≤ max.
// A clock whose counts were turned into time wrongly shows here.
func checkLatRow(t *testing.T, out string) {
	t.Helper()
	row, v := resultRow(t, out, "t_typical[usec]", 9)
	tmin, tmax, typ, p99, p999 := v[2], v[3], v[4], v[7], v[8]
	if v[1] != 500 || tmin <= 0 || typ < tmin || p99 < typ || p999 < p99 || tmax < p999 {
		t.Errorf("latency row %q: want 500 iterations and 0 < t_min ≤ t_typical ≤ 99%% ≤ 99.9%% ≤ t_max", row)
	}
}

// checkBWRow checks a bandwidth test's figures for sense, not speed:
// positive, a peak no slower than the average (the peak is the best of
// the runs of messages from a post to a completion, the whole run among
// them), and under a thousand times the average (a peak measured between
// polls once took a burst of completions for 6,000 times the average).
func checkBWRow(t *testing.T, out string) {
	t.Helper()
	row, v := resultRow(t, out, "BW peak[MB/sec]", 5)
	peak, avg, rate := v[2], v[3], v[4]
	if avg <= 0 || rate <= 0 || peak < avg*0.99 || peak > avg*1000 {
		t.Errorf("bandwidth row %q: want 0 < average ≤ peak < 1000 × average, and a message rate", row)
	}
}

// resultRow returns the row of n numbers under the header line of out
// that contains header, or fails the test.
func resultRow(t *testing.T, out, header string, n int) (string, []float64) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.Contains(l, header) || i+1 == len(lines) {
			continue
		}
		row := lines[i+1]
		f := strings.Fields(row)
		if len(f) != n {
			t.Fatalf("row %q under %q: %d fields, want %d", row, header, len(f), n)
		}
		v := make([]float64, n)
		for j, s := range f {
			var err error
			if v[j], err = strconv.ParseFloat(s, 64); err != nil {
				t.Fatalf("row %q under %q: field %d: %v", row, header, j, err)
			}
		}
		return row, v
	}
	t.Fatalf("no row under %q in:\n%s", header, out)
	return "", nil
}
