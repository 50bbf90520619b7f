package main

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/test/vm/internal/plan"
)

// A bench VM's console, cut down: the Go benchmarks, their C twins, and
// one run of each tool pair's sides.
var benchConsole = []string{
	"BenchmarkPollEmpty-2        	  897423	       131.4 ns/op	       0 B/op	       0 allocs/op",
	"BenchmarkPollDrain/batch=1-2         	     662	    178241 ns/op	       661.4 ns/CQE	       0 B/op	       0 allocs/op",
	"BenchmarkPostSend-2                  	     129	    801140 ns/op	     24936 ns/WR	      26 B/op	       0 allocs/op",
	"cbench PollEmpty 1000000 100 ns/op",
	"cbench PollEmpty 1000000 120 ns/op",
	"cbench PollDrain/batch=1 300 600 ns/CQE",
	"cbench PostSend 500 2.5e+04 ns/WR",
	"  bench send_lat c #0 client|  64      2000          11.95          287.07       14.25    \t       15.42       \t10.61  \t\t41.03   \t\t239.71 ",
	"  bench send_lat go #1 client|  64       2000         11.83        3642.48      15.41            27.93        120.98         173.74                 1604.77",
	"  bench send_lat go #2 client|  64       2000         13.86        2260.60      16.00            25.96        86.88          212.29                 1672.47",
	"  bench send_lat c #3 client|  64      2000          12.23          996.36       14.18    \t       15.46       \t11.70  \t\t46.07   \t\t223.97 ",
	"  bench send_bw c #0 client|  4096       5000             57.29              44.00  \t\t   0.011269",
	"  bench send_bw go #1 client|  4096       5000           53.23              33.00                0.009746",
	"  bench pingpong c #0 client| 8192000 bytes in 0.10 seconds = 655.36 Mbit/sec",
	"  bench pingpong c #0 client| 2000 iters in 0.10 seconds = 50.00 usec/iter",
	"  bench pingpong go #1 client| 8192000 bytes in 0.08 seconds = 819.20 Mbit/sec",
	"  bench pingpong go #1 client| 2000 iters in 0.08 seconds = 40.00 usec/iter",
	"  bench cmtime c #0 client|step              total ms     max ms     min us  us / conn",
	"  bench cmtime c #0 client|create id    :        1.00       0.10       5.00      10.00",
	"  bench cmtime c #0 client|resolve addr :       10.00       5.00      50.00     100.00",
	"  bench cmtime c #0 client|connect      :      100.00      50.00     500.00    1000.00",
	"  bench cmtime c #0 client|disconnect   :       50.00      20.00     200.00     500.00",
	"  bench cmtime c #0 client|destroy      :        5.00       1.00       2.00      50.00",
	"  bench cmtime go #1 client|step              total ms     max ms     min us  us / conn",
	"  bench cmtime go #1 client|connect      :      120.00      60.00     400.00    1200.00",
	"  bench cmtime go #1 client|disconnect   :       40.00      20.00     100.00     400.00",
	"  bench cmtime go #1 client|100 connections: 1600.00 us per connection, setup and teardown",
	"  bench stream_lat c #0 client|name      bytes   xfers   iters   total       time     Gb/sec    usec/xfer",
	"  bench stream_lat c #0 client| custom    64      1       2k      250k        1.20s      0.00     300.00", // as the step's prefix ends
	"  bench stream_lat go #1 client|custom    64      1       2k      250k        1.60s      0.00     400.00",
	"  bench stream_bw_tcp go #1 client|custom    64k     200     1       25m         0.50s      0.42    1250.00",
}

func TestParseBench(t *testing.T) {
	r := parseBench(benchConsole)
	want := &benchResult{
		MicroC:  map[string][]float64{"PollEmpty": {100, 120}, "PollDrain/batch=1": {600}, "PostSend": {25000}},
		MicroGo: map[string][]float64{"PollEmpty": {131.4}, "PollDrain/batch=1": {661.4}, "PostSend": {24936}},
		Allocs:  map[string]float64{"PollEmpty": 0, "PollDrain/batch=1": 0, "PostSend": 0},
		ToolC: map[string][]float64{
			"send_lat/t_typical [µs]": {14.25, 14.18}, "send_lat/t_avg [µs]": {15.42, 15.46}, "send_lat/99% [µs]": {41.03, 46.07},
			"send_bw/BW average [MB/s]": {44}, "send_bw/MsgRate [Mpps]": {0.011269},
			"pingpong/usec/iter": {50}, "pingpong/Mbit/sec": {655.36},
			"cmtime/setup [µs/conn]": {1110}, "cmtime/teardown [µs/conn]": {550}, "cmtime/total [µs/conn]": {1660},
			"stream_lat/usec/xfer": {300},
		},
		ToolGo: map[string][]float64{
			"send_lat/t_typical [µs]": {15.41, 16}, "send_lat/t_avg [µs]": {27.93, 25.96}, "send_lat/99% [µs]": {173.74, 212.29},
			"send_bw/BW average [MB/s]": {33}, "send_bw/MsgRate [Mpps]": {0.009746},
			"pingpong/usec/iter": {40}, "pingpong/Mbit/sec": {819.2},
			"cmtime/setup [µs/conn]": {1200}, "cmtime/teardown [µs/conn]": {400}, "cmtime/total [µs/conn]": {1600},
			"stream_lat/usec/xfer": {400}, "stream_bw_tcp/Gb/sec": {0.42},
		},
	}
	if diff := cmp.Diff(want, r, cmp.AllowUnexported(benchResult{})); diff != "" {
		t.Errorf("parseBench (-want +got):\n%s", diff)
	}
}

func TestBenchTables(t *testing.T) {
	r := parseBench(benchConsole)
	micro, tools := r.microTable(), r.toolTable()
	for _, want := range []string{
		"| empty poll | ns/op | 100 | 131 | 1.31× | ≤ 0.8× **missed** | 0 |", // each side's best run
		"| poll per CQE, batch 1 | ns/CQE | 600 | 661 | 1.10× | ≤ 0.9× **missed** | 0 |",
		"| PostSend per WR (batches of 32, one doorbell) | ns/WR | 25000 | 24936 | 1.00× |  | 0 |",
		"| PostRecv per WR | ns/WR | – | – | – |  | – |",
		"| SRQ.PostRecv per WR (C: ibv_post_srq_recv) | ns/WR | – | – | – |  | – |",
	} {
		if !strings.Contains(micro, want) {
			t.Errorf("hot-path table lacks %q:\n%s", want, micro)
		}
	}
	for _, want := range []string{
		"| send_lat 64B | t_typical [µs] | 14.2 | 15.7 | 1.10× | ≤ 1.0× **missed** |",
		"| send_bw 4096B | BW average [MB/s] | 44.0 | 33.0 | 0.75× |  |",
		"| rc_pingpong 4096B | usec/iter | 50.0 | 40.0 | 0.80× | ≤ 1.0× met |",
		"| rc_pingpong 4096B | Mbit/sec | 655 | 819 | 1.25× | ≥ 1.0× met |",
		"| write_lat 64B | t_typical [µs] | – | – | missing |  |",
		"| cmtime 100 connections | total [µs/conn] | 1660 | 1600 | 0.96× | ≤ 1.0× met |",
		"| cmtime 100 connections | setup [µs/conn] | 1110 | 1200 | 1.08× |  |",
		"| rstream -T b / goverbs stream, 64B ping-pong | usec/xfer | 300 | 400 | 1.33× | ≤ 1.0× **missed** |",
		"| the same over TCP (-T s): 64KiB bursts | Gb/sec | – | 0.420 | missing |  |",
	} {
		if !strings.Contains(tools, want) {
			t.Errorf("tool table lacks %q:\n%s", want, tools)
		}
	}
}

// TestCountTable: under -qemuicount the same console gives a table of
// instruction counts, with the rows that have both sides and no targets.
func TestCountTable(t *testing.T) {
	got := parseBench(benchConsole).countTable()
	want := "| benchmark | instructions per | rdma-core (C) | goverbs | goverbs / rdma-core |\n|---|---|---|---|---|\n" +
		"| empty poll | op | 100.0 | 131.4 | 1.31× |\n" +
		"| poll per CQE, batch 1 | CQE | 600.0 | 661.4 | 1.10× |\n" +
		"| PostSend per WR (batches of 32, one doorbell) | WR | 25,000 | 24,936 | 1.00× |\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("countTable (-want +got):\n%s", diff)
	}
	for v, want := range map[float64]string{70.35: "70.3", 999.96: "1000.0", 2378: "2,378", 1234567: "1,234,567", 11908.4: "11,908"} {
		if got := countNum(v); got != want {
			t.Errorf("countNum(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestWriteGenerated: a generated file is written whole, over whatever
// was there, and says so on its first line.
func TestWriteGenerated(t *testing.T) {
	p := filepath.Join(t.TempDir(), "results.md")
	if err := os.WriteFile(p, []byte("# Old\n\nhand-written\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeGenerated(p, "Title", "body\n\n"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(generatedLine+"\n\n# Title\n\nbody\n", string(got)); diff != "" {
		t.Errorf("writeGenerated (-want +got):\n%s", diff)
	}
}

func TestMedianNum(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median(3,1,2) = %v", got)
	}
	if got := median([]float64{4, 1}); got != 2.5 {
		t.Errorf("median(4,1) = %v", got)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median(nil) is not NaN")
	}
	for v, want := range map[float64]string{0.011269: "0.0113", 14.215: "14.2", 131.4: "131", 24936: "24936", 0: "0", math.NaN(): "–"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}

// Files come out of the guest as base64 lines; the host's console copy
// keeps them, the log does not show them.
func TestBenchFiles(t *testing.T) {
	data := []byte(strings.Repeat("pprof\x00\x01", 40))
	enc := base64.StdEncoding.EncodeToString(data)
	console := []string{"noise", plan.MarkFile + "a.pprof " + enc[:100], "more noise", plan.MarkFile + "a.pprof " + enc[100:],
		plan.MarkFile + "a.pprof end", plan.MarkFile + "../evil x", plan.MarkFile + "../evil end", plan.MarkFile + "cut.pprof QUJD"}
	got := benchFiles(console)
	if diff := cmp.Diff(map[string][]byte{"a.pprof": data}, got); diff != "" {
		t.Errorf("benchFiles (-want +got):\n%s", diff)
	}
}

// The chart is well-formed XML with a row per kernel, whatever is missing.
func TestBenchSVG(t *testing.T) {
	full := parseBench(benchConsole)
	full.Kernel = "Linux 6.1.0-56-amd64 (amd64)"
	empty := parseBench(nil)
	empty.Kernel = "Linux 6.12.117+deb12-amd64 (amd64)"
	svg := benchSVG([]*benchResult{full, empty}, "2026-11-21")
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, svg)
		}
	}
	for _, want := range []string{full.Kernel, empty.Kernel, "send_lat", "rc_pingpong", "empty poll", "1.31×", "no C figure"} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
		t.Errorf("chart has NaN or Inf:\n%s", svg)
	}
}

func TestMlx5Table(t *testing.T) {
	out := []string{
		"goos: linux", "cpu: AMD EPYC",
		"BenchmarkMlx5PollEmpty-2   \t61395108\t         3.656 ns/op\t       0 B/op\t       0 allocs/op",
		"BenchmarkMlx5PollCQE/batch=16-2        \t 9611012\t        22.63 ns/op\t       0 B/op\t       0 allocs/op",
		"PASS",
	}
	got := mlx5Table(out)
	for _, want := range []string{"AMD EPYC", "| Mlx5PollEmpty | 3.656 ns per empty poll | 0 |", "| Mlx5PollCQE/batch=16 | 22.63 ns per CQE | 0 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

// TestBenchPairsFlag: -benchpairs keeps only the matching tool pairs, and
// any flag that leaves part of make bench out keeps its tables unwritten.
func TestBenchPairsFlag(t *testing.T) {
	defer func(p string, m int, tools bool) {
		*flagBenchPairs, *flagBenchMicro, *flagBenchTools = p, m, tools
	}(*flagBenchPairs, *flagBenchMicro, *flagBenchTools)
	tests := func() map[string]int {
		n := map[string]int{}
		for _, s := range toolSteps("/lib", func(string) string { return "" }) {
			n[strings.Fields(s.Name)[1]]++
		}
		return n
	}
	*flagBenchPairs, *flagBenchMicro, *flagBenchTools = "", 3, true
	if partialBench() {
		t.Error("partialBench with make bench's flags")
	}
	all := tests()
	if len(all) != 13 {
		t.Errorf("tool pairs with no -benchpairs: %v, want thirteen tests", all)
	}
	*flagBenchPairs = "^pingpong$"
	got := tests()
	if want := map[string]int{"pingpong": all["pingpong"]}; !cmp.Equal(want, got) {
		t.Errorf("-benchpairs=^pingpong$: %v, want %v", got, want)
	}
	if !partialBench() {
		t.Error("partialBench false with -benchpairs")
	}
	if table := parseBench(benchConsole).toolTable(); strings.Contains(table, "send_lat") || !strings.Contains(table, "rc_pingpong") {
		t.Errorf("-benchpairs=^pingpong$: the tool table has other pairs' rows, or not its own:\n%s", table)
	}
	// Each pair's runs have its length, and each server a port of its own.
	*flagBenchPairs = ""
	ports := map[string]bool{}
	for _, s := range toolSteps("/lib", func(string) string { return "" }) {
		test := strings.Fields(s.Name)[1]
		flag, want := "-n", strconv.Itoa(bwIters)
		switch {
		case strings.HasPrefix(test, "cmtime") && s.Background: // the server: until stopped
			flag, want = "-b", "192.0.2.1"
			if !s.StopAfterNext {
				t.Errorf("%s: not stopped after its client", s.Name)
			}
		case strings.HasPrefix(test, "cmtime"):
			flag, want = "-c", strconv.Itoa(cmtimeConns)
			if steps := slices.Contains(s.Argv, "-steps"); steps != (test == "cmtime_steps" && s.Argv[0] == "/bin/goverbs") {
				t.Errorf("%s: %v: -steps where it should not be, or not where it should", s.Name, s.Argv)
			}
		case strings.HasPrefix(test, "stream_lat"):
			flag, want = "-I", strconv.Itoa(streamLatIters)
		case strings.HasPrefix(test, "stream_bw"):
			flag, want = "-C", strconv.Itoa(streamBWCount)
		case strings.HasSuffix(test, "_lat"):
			want = strconv.Itoa(latIters)
		case test == "pingpong":
			want = strconv.Itoa(pingpongIters)
		}
		if i := slices.Index(s.Argv, flag); i < 0 || s.Argv[i+1] != want {
			t.Errorf("%s: %v, want %s %s", s.Name, s.Argv, flag, want)
		}
		if s.Background {
			p := s.Argv[slices.Index(s.Argv, "-p")+1]
			if ports[p] {
				t.Errorf("%s: port %s taken before", s.Name, p)
			}
			ports[p] = true
		}
	}
	*flagBenchPairs, *flagBenchMicro = "", 0
	if !partialBench() || len(benchSteps(nil, true, "/lib")) != len(toolSteps("/lib", func(string) string { return "" })) {
		t.Error("-benchmicro=0 should leave only the tool pairs, and their tables unwritten")
	}
	*flagBenchMicro, *flagBenchTools = 3, false
	if !partialBench() {
		t.Error("partialBench false with -benchtools=false")
	}
	defer func(v int) { *flagQemuIcount = v }(*flagQemuIcount)
	*flagBenchTools, *flagQemuIcount = true, 0
	if !partialBench() {
		t.Error("partialBench false with -qemuicount=0: instruction counts must not become the tables")
	}
	// The counts are written when every Go benchmark was counted, tools
	// or not; not with -run, nor without the Go benchmarks, nor untimed.
	*flagBenchTools = false
	if !fullCount() {
		t.Error("fullCount false with -qemuicount=0 -benchtools=false")
	}
	defer func(v string) { *flagRun = v }(*flagRun)
	*flagRun = "PostRecv"
	if fullCount() {
		t.Error("fullCount true with -run")
	}
	*flagRun, *flagBenchMicro = "", 0
	if fullCount() {
		t.Error("fullCount true with -benchmicro=0")
	}
	*flagBenchMicro, *flagQemuIcount = 3, -1
	if fullCount() {
		t.Error("fullCount true without -qemuicount")
	}
}

// TestWriteCountsTools: a counting run with tool pairs writes their table
// below the Go benchmarks' counts, saying that its times are counts; one
// without writes none.
func TestWriteCountsTools(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := parseBench(benchConsole)
	r.Kernel = "Linux 6.1.0-56-amd64 (amd64)"
	defer func(v bool) { *flagBenchTools = v }(*flagBenchTools)
	for _, tools := range []bool{true, false} {
		*flagBenchTools = tools
		if err := writeCounts(root, []*benchResult{r}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(root, countsFile))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		has := strings.Contains(text, "1 µs: 1,000 instructions") && strings.Contains(text, r.toolTable())
		if has != tools || !strings.Contains(text, r.countTable()) {
			t.Errorf("with tools %v: tool table written %v, want %v; the counts' table there: %v\n%s", tools, has, tools, strings.Contains(text, r.countTable()), text)
		}
	}
}

// TestParseCmtimeSteps: goverbs cmtime -steps' rows sum as cmtime's, its
// "destroy qp" on the teardown side, under the pair's own key.
func TestParseCmtimeSteps(t *testing.T) {
	row := func(side, n, step string, v float64) string {
		return fmt.Sprintf("[6.1/amd64]   bench cmtime_steps %s #%s client| %-13s:       1.00       1.00       1.00 %10.2f", side, n, step, v)
	}
	r := parseBench([]string{
		row("go", "1", "create id", 10), row("go", "1", "connect", 300), row("go", "1", "disconnect", 200),
		row("go", "1", "destroy qp", 50), row("go", "1", "destroy", 5),
		row("c", "0", "create id", 8), row("c", "0", "connect", 380), row("c", "0", "disconnect", 210), row("c", "0", "destroy", 6),
	})
	for _, c := range []struct {
		side map[string][]float64
		fig  string
		want float64
	}{
		{r.ToolGo, "setup [µs/conn]", 310}, {r.ToolGo, "teardown [µs/conn]", 255}, {r.ToolGo, "total [µs/conn]", 565},
		{r.ToolC, "setup [µs/conn]", 388}, {r.ToolC, "teardown [µs/conn]", 216},
	} {
		if got := c.side["cmtime_steps/"+c.fig]; len(got) != 1 || got[0] != c.want {
			t.Errorf("cmtime_steps/%s: %v, want [%v]", c.fig, got, c.want)
		}
	}
	if len(r.ToolGo["cmtime/total [µs/conn]"]) != 0 {
		t.Error("cmtime_steps rows counted as cmtime's")
	}
}
