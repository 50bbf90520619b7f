package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/test/vm/internal/plan"
)

// make bench: in one VM per kernel, the Go benchmarks on real rxe rings
// beside the same loops in C (test/bench/testdata/cbench.c), then
// rdma-core's tools beside goverbs' with the same parameters: perftest's
// ib_{send,write}_{lat,bw} against goverbs perf, ibv_rc_pingpong against
// goverbs pingpong, librdmacm's cmtime against goverbs cmtime (connection
// setup and teardown by rdmacm). Each pair runs in both orders
// (rdma-core, goverbs, goverbs, rdma-core) to cancel drift. The host turns the console into
// ratio tables in docs/performance-results.md and a chart,
// docs/performance.svg; a run under -qemuicount writes its instruction
// counts into docs/performance-counts.md.

// noCheckptr is set in bench mode: -d=checkptr instruments every unsafe
// conversion, which the hot paths make, so benchmarks run without it.
var noCheckptr bool

var (
	flagBenchRounds = flag.Int("benchrounds", 2, "bench mode: rounds of each rdma-core/goverbs pair; each round runs both orders (C, Go, Go, C), and the tables take the median")
	flagBenchMicro  = flag.Int("benchmicro", 3, "bench mode: runs of the Go benchmarks, each after a run of their C twins (and one more C run at the end); the tables take each side's best; 0 runs none of them and writes no tables")
	flagBenchTools  = flag.Bool("benchtools", true, "bench mode: run the tool pairs (perftest, ibv_rc_pingpong, cmtime); false runs only the Go benchmarks and their C twins")
	flagBenchPairs  = flag.String("benchpairs", "", "bench mode: run only the tool pairs whose test (send_lat, write_lat, send_bw, write_bw, pingpong, cmtime) matches this `regexp`; the tables are then not written")
	flagBenchProf   = flag.String("benchprofile", "", "bench mode: take CPU profiles in the guest (the Go benchmarks, a long goverbs perf client per test, and a goverbs cmtime pair of 400 connections, outside the tables) and write them into this `directory` on the host")
)

// benchPairs are the perftest measurements: perftest's tool and goverbs
// perf with the same parameters.
//
// The latency runs are 20,000 iterations long (latIters), where perftest's
// default is 1,000: the p99 is the 200th-slowest sample, and each of the
// guest's 4 ms timer ticks stalls one iteration, so a run must span enough
// ticks (50 to 150 at this length) for its p99 not to follow how many it
// happened to span.
var benchPairs = []benchPair{
	{"send_lat", "ib_send_lat", 64, latIters},
	{"write_lat", "ib_write_lat", 64, latIters},
	{"send_bw", "ib_send_bw", 4096, bwIters},
	{"write_bw", "ib_write_bw", 4096, bwIters},
}

// benchPair is one perftest test and the goverbs perf test beside it.
type benchPair struct {
	test, perftest string
	size, iters    int
}

// perftestArgv is the perftest command of the pair's side, n iterations
// long (the port and, for a client, the server's address go after it).
func (bp benchPair) perftestArgv(n int) []string {
	return []string{"/usr/bin/" + bp.perftest, "-d", "rxe0", "-x", "1", "-F", "-s", fmt.Sprint(bp.size), "-n", fmt.Sprint(n)}
}

// goverbsArgv is the goverbs perf command beside perftestArgv.
func (bp benchPair) goverbsArgv(n int) []string {
	return []string{"/bin/goverbs", "perf", "-t", bp.test, "-d", "rxe0", "-g", "1", "-s", fmt.Sprint(bp.size), "-n", fmt.Sprint(n)}
}

// latIters is the length of each latency pair's runs.
const latIters = 20000

// bwIters is the length of each bandwidth pair's runs.
const bwIters = 5000

// pingpongIters is the length of each ibv_rc_pingpong run (its default
// size, 4096 bytes, and receive depth, 500).
const pingpongIters = 2000

// cmtimeConns is how many connections each cmtime run makes at once and
// then closes (cmtime's default).
const cmtimeConns = 100

// streamLatIters and streamBWCount are the stream pairs' lengths: 64-byte
// ping-pongs, and bursts of 64 KiB transfers each way.
const (
	streamLatIters = 2000
	streamBWCount  = 200
)

// streamPairs are rstream (rsockets) beside goverbs stream (rdmanet):
// both blocking (rstream -T b; rdmanet's default), both spinning
// (rstream's default, nonblocking calls in a loop; rdmanet's BusyPoll,
// which spins up to 1 ms before it parks, longer than any round trip
// here), and both over TCP sockets (-T s): the reference the issue shows
// rdmanet against, not a target.
var streamPairs = []struct {
	test      string
	args      []string // both tools', both sides'
	tcp, spin bool
}{
	{"stream_lat", []string{"-S", "64", "-C", "1", "-I", fmt.Sprint(streamLatIters)}, false, false},
	{"stream_bw", []string{"-S", "65536", "-C", fmt.Sprint(streamBWCount), "-I", "1"}, false, false}, // rstream reads "64k" as 64
	{"stream_lat_spin", []string{"-S", "64", "-C", "1", "-I", fmt.Sprint(streamLatIters)}, false, true},
	{"stream_bw_spin", []string{"-S", "65536", "-C", fmt.Sprint(streamBWCount), "-I", "1"}, false, true},
	{"stream_lat_tcp", []string{"-S", "64", "-C", "1", "-I", fmt.Sprint(streamLatIters)}, true, false},
	{"stream_bw_tcp", []string{"-S", "65536", "-C", fmt.Sprint(streamBWCount), "-I", "1"}, true, false},
}

// mwpeerGuest is where the C memory-window peer lies in the guest
// (test/interop's TestMemoryWindowInterop).
const mwpeerGuest = "/bin/mwpeer"

// benchGuestCBench is where the C twin of the Go benchmarks lies in the guest.
const benchGuestCBench = "/bin/cbench"

// buildCBench compiles test/bench/testdata/cbench.c (buildC).
func buildCBench(ctx context.Context, a *apt, root, dir, arch string, pkgDirs []string) string {
	return buildC(ctx, a, root, dir, arch, pkgDirs, "test/bench/testdata/cbench.c", "C benchmarks")
}

// buildC compiles a C program of the repository (src, relative to root)
// on the host with gcc, against the libibverbs-dev of the rdma-core that
// the guest runs (its headers) and that guest's libibverbs.so.1, into
// dir. It returns "" and says why when it cannot (what names the
// program, for that line): the steps that need it then go without.
func buildC(ctx context.Context, a *apt, root, dir, arch string, pkgDirs []string, src, what string) string {
	if arch != runtime.GOARCH {
		logf("%s: no %s: %s is compiled with the host's gcc, which targets %s", arch, what, filepath.Base(src), runtime.GOARCH)
		return ""
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		logf("installing gcc with apt-get (for %s)", src)
		if err := asRootEnv(ctx, []string{"install", "-y", "-qq", "gcc", "libc6-dev"}); err != nil {
			logf("%s: no %s: gcc: %v", arch, what, err)
			return ""
		}
	}
	info, err := a.show(ctx, "libibverbs-dev", debArch(arch))
	if err == nil {
		var deb string
		if deb, err = a.download(ctx, info); err == nil {
			var dev string
			if dev, err = a.unpack(ctx, deb); err == nil {
				out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), ".c"))
				args := []string{"-O2", "-Wall", "-o", out, filepath.Join(root, filepath.FromSlash(src)),
					"-I" + filepath.Join(dev, "usr", "include")}
				lib := ""
				for _, d := range pkgDirs {
					for _, dir := range strings.Split(multiarchLibPath(arch), ":") {
						l := filepath.Join(d, dir)
						if _, err := os.Stat(l); err != nil {
							continue
						}
						if _, err := os.Stat(filepath.Join(l, "libibverbs.so.1")); err == nil {
							lib = filepath.Join(l, "libibverbs.so.1")
						}
						args = append(args, "-Wl,-rpath-link,"+l)
					}
				}
				if lib == "" {
					err = fmt.Errorf("libibverbs.so.1 is in none of the guest's packages")
				} else if err = run(ctx, "", "gcc", append(args, lib)...); err == nil {
					return out
				}
			}
		}
	}
	logf("%s: no %s: %v", arch, what, err)
	return ""
}

// rxeCounters is the bench device's port counters: each tool pair's client
// step prints how they moved (packets, retries, RNR NAKs), both sides'
// traffic, as client and server share rxe0.
const rxeCounters = "/sys/class/infiniband/rxe0/ports/1/hw_counters"

// benchSteps is the plan of a bench VM: the C benchmarks, the Go
// benchmarks (tests), the C benchmarks again, then the tools' pairs.
// Profiles (with -benchprofile) are written in the guest's /tmp and
// printed on the console by "/init dump".
func benchSteps(tests []plan.Step, cbench bool, libPath string) []plan.Step {
	var steps []plan.Step
	var profiles []string
	prof := func(name string) string {
		if *flagBenchProf == "" {
			return ""
		}
		p := "/tmp/" + name + ".pprof"
		profiles = append(profiles, p)
		return p
	}
	c := func(i int) plan.Step {
		return plan.Step{Name: fmt.Sprintf("cbench #%d (rdma-core)", i), Argv: []string{benchGuestCBench, "rxe0"},
			LibPath: libPath, TimeoutSec: 300}
	}
	// C, Go, C, Go, …, C: each Go run between two C runs, so that load
	// on the host (other work on its cores) reaches both sides alike.
	for r := range *flagBenchMicro {
		if cbench {
			steps = append(steps, c(r))
		}
		for _, t := range tests {
			t.Name = fmt.Sprintf("%s #%d", t.Name, r)
			t.Argv = slices.Clone(t.Argv)
			if r == 0 {
				if p := prof("gobench"); p != "" {
					t.Argv = append(t.Argv, "-test.cpuprofile="+p)
				}
			}
			steps = append(steps, t)
		}
	}
	if cbench && *flagBenchMicro > 0 {
		steps = append(steps, c(*flagBenchMicro))
	}
	if *flagBenchTools {
		steps = append(steps, toolSteps(libPath, prof)...)
	}
	if len(profiles) > 0 {
		// A few MB each through the serial console.
		steps = append(steps, plan.Step{Name: "profiles out", Argv: append([]string{"/init", "dump"}, profiles...), TimeoutSec: 60 + 30*len(profiles)})
	}
	return steps
}

// toolSteps is the tool pairs of a bench VM (rdma-core's, then goverbs',
// in both orders), and with -benchprofile one long goverbs perf client
// per test, its CPU profile named by prof. Each server listens on a port
// of its own, so that a late server never meets the next pair's client.
func toolSteps(libPath string, prof func(string) string) []plan.Step {
	var steps []plan.Step
	port := 20000
	// pair adds test's runs: c's and g's argv, then -p and the port, then
	// srv for the server and cli for its client. stop: the server serves
	// until it is stopped, after its client.
	pair := func(test string, c, g, srv, cli []string, stop bool) {
		if !benchPairWanted(test) {
			return
		}
		for r := 0; r < *flagBenchRounds; r++ {
			for i, side := range []string{"c", "go", "go", "c"} {
				port++
				n := 4*r + i
				argv, lib := slices.Clone(g), ""
				if side == "c" {
					argv, lib = slices.Clone(c), libPath
				}
				argv = append(argv, "-p", fmt.Sprint(port))
				tag := fmt.Sprintf("bench %s %s #%d", test, side, n)
				steps = append(steps,
					plan.Step{Name: tag + " server", Argv: append(slices.Clone(argv), srv...), LibPath: lib, Background: true, StopAfterNext: stop,
						Prefix: "  " + tag + " server| ", TimeoutSec: 120},
					plan.Step{Name: tag + " client", Argv: append(argv, cli...), LibPath: lib,
						DelayMs: 1000, Prefix: "  " + tag + " client| ", TimeoutSec: 120, Counters: rxeCounters})
			}
		}
	}
	local := []string{"127.0.0.1"}
	for _, bp := range benchPairs {
		pair(bp.test, bp.perftestArgv(bp.iters), bp.goverbsArgv(bp.iters), nil, local, false)
	}
	pp := []string{"-d", "rxe0", "-g", "1", "-n", fmt.Sprint(pingpongIters)}
	pair("pingpong", append([]string{"/usr/bin/ibv_rc_pingpong"}, pp...), append([]string{"/bin/goverbs", "pingpong"}, pp...), nil, local, false)
	// cmtime's server serves until it is stopped, and its client names the
	// server with -s.
	pair("cmtime", []string{"/usr/bin/cmtime"}, []string{"/bin/goverbs", "cmtime"},
		[]string{"-b", "192.0.2.1"}, []string{"-s", "192.0.2.1", "-c", fmt.Sprint(cmtimeConns)}, true)
	// The same on rdmacm's low level, step by step as cmtime (one event
	// channel, each step for every connection), against goverbs' server:
	// its rows beside cmtime's say where the connection's cost goes.
	pair("cmtime_steps", []string{"/usr/bin/cmtime"}, []string{"/bin/goverbs", "cmtime", "-steps"},
		[]string{"-b", "192.0.2.1"}, []string{"-s", "192.0.2.1", "-c", fmt.Sprint(cmtimeConns)}, true)
	// rstream's server serves one client's run, then exits.
	for _, sp := range streamPairs {
		c, g := []string{"/usr/bin/rstream", "-T", "b"}, []string{"/bin/goverbs", "stream"}
		switch {
		case sp.tcp:
			c, g = []string{"/usr/bin/rstream", "-T", "s", "-T", "b"}, append(g, "-T", "s") // one letter a -T
		case sp.spin:
			c, g = []string{"/usr/bin/rstream"}, append(g, "-busypoll", "1ms")
		}
		pair(sp.test, append(c, sp.args...), append(g, sp.args...), []string{"-b", "192.0.2.1"}, []string{"-s", "192.0.2.1"}, false)
	}
	// One goverbs cmtime pair, 4 times as many connections, both sides
	// profiled.
	if benchPairWanted("cmtime") && *flagBenchProf != "" {
		port++
		argv := []string{"/bin/goverbs", "cmtime", "-p", fmt.Sprint(port)}
		tag := "profile cmtime"
		steps = append(steps,
			plan.Step{Name: tag + " server", Argv: append(slices.Clone(argv), "-b", "192.0.2.1", "-cpuprofile", prof("cmtime-server")),
				Background: true, StopAfterNext: true, Prefix: "  " + tag + " server| ", TimeoutSec: 300},
			plan.Step{Name: tag + " client", Argv: append(argv, "-s", "192.0.2.1", "-c", fmt.Sprint(4*cmtimeConns), "-cpuprofile", prof("cmtime-client")),
				DelayMs: 1000, Prefix: "  " + tag + " client| ", TimeoutSec: 300})
	}
	// Profiles need longer runs than the pairs (100 samples a second):
	// one goverbs perf run per test, 25 times as long, outside the tables.
	for _, bp := range benchPairs {
		if !benchPairWanted(bp.test) {
			continue
		}
		p := prof("perf-" + bp.test)
		if p == "" {
			break
		}
		port++
		argv := append(bp.goverbsArgv(25*bp.iters), "-p", fmt.Sprint(port))
		cli := append([]string{argv[0], argv[1], "-cpuprofile", p}, argv[2:]...)
		tag := "profile " + bp.test
		steps = append(steps,
			plan.Step{Name: tag + " server", Argv: argv, Background: true, Prefix: "  " + tag + " server| ", TimeoutSec: 300},
			plan.Step{Name: tag + " client", Argv: append(cli, "127.0.0.1"), DelayMs: 1000, Prefix: "  " + tag + " client| ", TimeoutSec: 300})
	}
	return steps
}

// benchPairWanted reports whether -benchpairs selects the tool pair test.
func benchPairWanted(test string) bool {
	return *flagBenchPairs == "" || regexp.MustCompile(*flagBenchPairs).MatchString(test) // checked in main
}

// partialBench reports whether the flags leave out part of make bench
// (-run, -benchmicro=0, -benchpairs, -benchtools=false) or measure
// something else than its timings (-qemuicount): then its tables are not
// written, since they would stand for a run that did not happen.
func partialBench() bool {
	return *flagRun != "" || *flagBenchMicro <= 0 || *flagBenchPairs != "" || !*flagBenchTools || *flagQemuIcount >= 0
}

// fullCount reports whether a -qemuicount bench run counted every Go
// benchmark (no -run, -benchmicro at least 1), so that its counts may
// replace docs/performance-counts.md, with the tool pairs it ran
// (make bench's: CountPairs, the pairs that block).
func fullCount() bool {
	return *flagQemuIcount >= 0 && *flagRun == "" && *flagBenchMicro > 0
}

// benchFigure is one figure a tool reports.
type benchFigure struct {
	name  string
	col   int  // column in perftest's result row
	lower bool // lower is better (latency), else higher (rates)
	// target is the ratio goverbs / rdma-core must meet: at most it when
	// lower is better, at least it otherwise; 0 for none.
	target float64
}

var benchFigures = map[string][]benchFigure{
	"lat": {{"t_typical [µs]", 4, true, 1}, {"t_avg [µs]", 5, true, 0}, {"99% [µs]", 7, true, 1}},
	"bw":  {{"BW average [MB/s]", 3, false, 0}, {"MsgRate [Mpps]", 4, false, 1}},
	// ibv_rc_pingpong's last two lines, as (value, unit) pairs.
	"pingpong": {{"usec/iter", 0, true, 1}, {"Mbit/sec", 1, false, 1}},
	// cmtime's steps summed per connection: those that make a connection
	// (rdmacm.Dial), those that end it (Conn.Close), and all.
	"cm": {{"setup [µs/conn]", 0, true, 0}, {"teardown [µs/conn]", 1, true, 0}, {"total [µs/conn]", 2, true, 1}},
	// rstream's row after its name and sizes: time, Gb/sec and µs per
	// one-way transfer. Over TCP, no target: a reference.
	"slat":     {{"usec/xfer", 2, true, 1}},
	"sbw":      {{"Gb/sec", 1, false, 1}},
	"slat_tcp": {{"usec/xfer", 2, true, 0}},
	"sbw_tcp":  {{"Gb/sec", 1, false, 0}},
}

// microTargets are the ratios goverbs / rdma-core the Go benchmarks must
// meet (at most), keyed by benchmark name.
var microTargets = map[string]float64{
	"PollEmpty":          0.8,
	"PollDrain/batch=1":  0.9,
	"PollDrain/batch=16": 0.9,
	"PollDrain/batch=64": 0.9,
	"PostSRQRecv":        1.0,
}

// microUnit is the unit each Go benchmark is compared in.
var microUnit = map[string]string{
	"PollEmpty":          "ns/op",
	"PollDrain/batch=1":  "ns/CQE",
	"PollDrain/batch=16": "ns/CQE",
	"PollDrain/batch=64": "ns/CQE",
	"ReqNotify":          "ns/op",
	"EventRoundTrip":     "ns/op",
	"PostPoll":           "ns/op",
	"PostSend":           "ns/WR",
	"PostRecv":           "ns/WR",
	"PostSRQRecv":        "ns/WR",
	"RegDereg":           "ns/op",
	"BindInvalidate":     "ns/op",
}

var microOrder = []string{"PollEmpty", "PollDrain/batch=1", "PollDrain/batch=16", "PollDrain/batch=64",
	"ReqNotify", "EventRoundTrip", "PostPoll", "PostSend", "PostRecv", "PostSRQRecv", "RegDereg", "BindInvalidate"}

// microLabel says in words what each Go benchmark measures.
var microLabel = map[string]string{
	"PollEmpty":          "empty poll",
	"PollDrain/batch=1":  "poll per CQE, batch 1",
	"PollDrain/batch=16": "poll per CQE, batch 16",
	"PollDrain/batch=64": "poll per CQE, batch 64",
	"ReqNotify":          "ReqNotify (REQ_NOTIFY_CQ write command)",
	"EventRoundTrip":     "event round trip: arm, post, wake, ack, poll",
	"PostPoll":           "a latency tool's step: post one write, poll its completion",
	"PostSend":           "PostSend per WR (batches of 32, one doorbell)",
	"PostRecv":           "PostRecv per WR",
	"PostSRQRecv":        "SRQ.PostRecv per WR (C: ibv_post_srq_recv)",
	"RegDereg":           "a grant and its revocation: register 4 KiB, deregister it",
	"BindInvalidate":     "the same with a type-2 window: bind, invalidate (each reaped)",
}

// benchResult is what one kernel's bench VM measured.
type benchResult struct {
	Kernel string // "Linux 6.1.0-56-amd64 (amd64)"
	Short  string // "6.1"
	// Micro: benchmark name -> C and Go values (one per run), Go allocs/op.
	MicroC, MicroGo map[string][]float64
	Allocs          map[string]float64
	// Tools: "send_lat/t_typical [µs]" -> values per side.
	ToolC, ToolGo map[string][]float64
}

var (
	// A client's result row: "  bench send_lat go #1 client|  64  2000  11.83 …".
	benchRow = regexp.MustCompile(`bench (\w+) (c|go) #\d+ client\|\s+(\d[\d.\s]*)$`)
	// ibv_rc_pingpong's and goverbs pingpong's summary lines.
	pingpongRow = regexp.MustCompile(`bench pingpong (c|go) #\d+ client\|\s*\d+ (?:iters|bytes) in [\d.]+ seconds = ([\d.]+) (usec/iter|Mbit/sec)$`)
	// A step of cmtime's report, and of goverbs cmtime's: its name, total
	// ms, max ms, min µs and µs per connection.
	cmtimeRow = regexp.MustCompile(`bench (cmtime\w*) (c|go) #(\d+) client\|([a-z ]+?) *: +[\d.]+ +[\d.]+ +[\d.]+ +([\d.]+)$`)
	// rstream's and goverbs stream's custom row: "custom 64 1 2k 250k 1.23s 0.00 300.00".
	streamRow = regexp.MustCompile(`bench (stream_\w+) (c|go) #\d+ client\| *custom +\S+ +\S+ +\S+ +\S+ +([\d.]+)s +([\d.]+) +([\d.]+)$`)
	// "BenchmarkPollDrain/batch=1-2   662   178241 ns/op   661.4 ns/CQE   0 B/op   0 allocs/op".
	goBenchRow = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)
	// "cbench PollEmpty 1000000 95.3 ns/op".
	cBenchRow = regexp.MustCompile(`^cbench (\S+) \d+ (\S+) (\S+)$`)
)

// parseBench reads one bench VM's console.
func parseBench(console []string) *benchResult {
	r := &benchResult{MicroC: map[string][]float64{}, MicroGo: map[string][]float64{}, Allocs: map[string]float64{},
		ToolC: map[string][]float64{}, ToolGo: map[string][]float64{}}
	tool := func(side string) map[string][]float64 {
		if side == "c" {
			return r.ToolC
		}
		return r.ToolGo
	}
	// cmtime's steps, summed per run: setup, teardown, total (µs/conn).
	cmRuns := map[string]*[3]float64{}
	var cmOrder []string
	for _, l := range console {
		l = strings.TrimRight(l, " \t\r")
		if m := cmtimeRow.FindStringSubmatch(l); m != nil {
			v, err := strconv.ParseFloat(m[5], 64)
			if err != nil {
				continue
			}
			run := m[1] + " " + m[2] + " " + m[3]
			if cmRuns[run] == nil {
				cmRuns[run] = &[3]float64{}
				cmOrder = append(cmOrder, run)
			}
			part := 0
			if step := strings.TrimSpace(m[4]); step == "disconnect" || step == "destroy qp" || step == "destroy" {
				part = 1
			}
			cmRuns[run][part] += v
			cmRuns[run][2] += v
			continue
		}
		if m := goBenchRow.FindStringSubmatch(l); m != nil {
			f := strings.Fields(m[2])
			for i := 0; i+1 < len(f); i += 2 {
				v, err := strconv.ParseFloat(f[i], 64)
				if err != nil {
					continue
				}
				switch unit := f[i+1]; {
				case unit == "allocs/op":
					// The least over the runs: a hot path that allocates
					// does so in every run, while an allocation elsewhere
					// in the process (counted too) comes and goes. The
					// AllocsPerRun tests hold each hot path at 0 exactly.
					if a, ok := r.Allocs[m[1]]; !ok || v < a {
						r.Allocs[m[1]] = v
					}
				case unit == microUnit[m[1]]:
					r.MicroGo[m[1]] = append(r.MicroGo[m[1]], v)
				}
			}
			continue
		}
		if m := cBenchRow.FindStringSubmatch(l); m != nil {
			if v, err := strconv.ParseFloat(m[2], 64); err == nil && m[3] == microUnit[m[1]] {
				r.MicroC[m[1]] = append(r.MicroC[m[1]], v)
			}
			continue
		}
		if m := streamRow.FindStringSubmatch(l); m != nil {
			var cols []float64
			for _, f := range m[3:] {
				if v, err := strconv.ParseFloat(f, 64); err == nil {
					cols = append(cols, v)
				}
			}
			for _, f := range benchFigures[toolKind(m[1])] {
				if f.col < len(cols) {
					k := m[1] + "/" + f.name
					tool(m[2])[k] = append(tool(m[2])[k], cols[f.col])
				}
			}
			continue
		}
		if m := pingpongRow.FindStringSubmatch(l); m != nil {
			if v, err := strconv.ParseFloat(m[2], 64); err == nil {
				k := "pingpong/" + m[3]
				tool(m[1])[k] = append(tool(m[1])[k], v)
			}
			continue
		}
		m := benchRow.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var cols []float64
		for _, f := range strings.Fields(m[3]) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				break
			}
			cols = append(cols, v)
		}
		for _, f := range benchFigures[toolKind(m[1])] {
			if f.col < len(cols) {
				k := m[1] + "/" + f.name
				tool(m[2])[k] = append(tool(m[2])[k], cols[f.col])
			}
		}
	}
	for _, run := range cmOrder {
		f := strings.Fields(run) // test, side, run number
		for _, fig := range benchFigures["cm"] {
			k := f[0] + "/" + fig.name
			tool(f[1])[k] = append(tool(f[1])[k], cmRuns[run][fig.col])
		}
	}
	return r
}

func toolKind(test string) string {
	switch {
	case test == "pingpong":
		return "pingpong"
	case strings.HasPrefix(test, "cmtime"):
		return "cm"
	case strings.HasPrefix(test, "stream_"):
		kind := "slat"
		if strings.Contains(test, "_bw") {
			kind = "sbw"
		}
		if strings.HasSuffix(test, "_tcp") {
			kind += "_tcp"
		}
		return kind
	case strings.HasSuffix(test, "_bw"):
		return "bw"
	}
	return "lat"
}

// best is the smallest of vs, NaN for none: for the hot-path figures,
// where load on the host can only add time, each side's best run.
func best(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	return slices.Min(vs)
}

// median of vs; NaN for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(vs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// num formats a figure with 3 significant digits, without exponents for
// the sizes we meet.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v >= 1000:
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	case v == 0:
		return "0"
	}
	digits := max(0, 2-int(math.Floor(math.Log10(math.Abs(v)))))
	return strconv.FormatFloat(v, 'f', digits, 64)
}

// verdict says whether a ratio meets its target.
func verdict(ratio, target float64, lower bool) string {
	switch {
	case target == 0 || math.IsNaN(ratio):
		return ""
	case lower && ratio <= target:
		return fmt.Sprintf("≤ %.1f× met", target)
	case lower:
		return fmt.Sprintf("≤ %.1f× **missed**", target)
	case ratio >= target:
		return fmt.Sprintf("≥ %.1f× met", target)
	}
	return fmt.Sprintf("≥ %.1f× **missed**", target)
}

// microTable prints the Go benchmarks beside their C twins, as Markdown.
func (r *benchResult) microTable() string {
	var b strings.Builder
	b.WriteString("| benchmark | unit | rdma-core (C) | goverbs | goverbs / rdma-core | target | goverbs allocs/op (least run) |\n|---|---|---|---|---|---|---|\n")
	for _, name := range microOrder {
		c, g := best(r.MicroC[name]), best(r.MicroGo[name])
		allocs := "–"
		if a, ok := r.Allocs[name]; ok {
			allocs = num(a)
		}
		ratio := g / c
		rs := "–"
		if !math.IsNaN(ratio) {
			rs = fmt.Sprintf("%.2f×", ratio)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", microLabel[name], microUnit[name], num(c), num(g),
			rs, verdict(ratio, microTargets[name], true), allocs)
	}
	return b.String()
}

// countTable prints, for a run under -qemuicount, the instructions each
// Go benchmark and its C twin executed per operation, as Markdown: the
// guest's clock then counts instructions, so each "ns" is one. Only the
// rows with both sides are printed, and no targets, which are on time.
func (r *benchResult) countTable() string {
	var b strings.Builder
	b.WriteString("| benchmark | instructions per | rdma-core (C) | goverbs | goverbs / rdma-core |\n|---|---|---|---|---|\n")
	for _, name := range microOrder {
		c, g := best(r.MicroC[name]), best(r.MicroGo[name])
		if math.IsNaN(c) || math.IsNaN(g) {
			continue
		}
		_, per, _ := strings.Cut(microUnit[name], "/")
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.2f× |\n", microLabel[name], per, countNum(c), countNum(g), g/c)
	}
	return b.String()
}

// countNum prints an instruction count: whole numbers from 1000 up, with
// a thousands separator, one decimal below.
func countNum(v float64) string {
	if v < 1000 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	s := strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// writeCounts writes docs/performance-counts.md whole, from a
// -qemuicount run.
func writeCounts(root string, results []*benchResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, `make bench`'s counting run (`-qemuicount=0`: one vCPU, the guest's clock advancing one "+
		"nanosecond an instruction), the Go benchmarks once between two runs of their C twins; each side's "+
		"figure is its least run. How to read them: [PERFORMANCE.md](PERFORMANCE.md).\n", time.Now().UTC().Format("2006-01-02"))
	for _, r := range results {
		fmt.Fprintf(&b, "\n### %s\n\n%s", r.Kernel, r.countTable())
		if *flagBenchTools {
			fmt.Fprintf(&b, "\nThe tool pairs that block (each side's median of its runs). The guest's clock counts instructions, so a "+
				"time is a count (1 µs: 1,000 instructions, of both processes and the kernel) and a rate is per instruction; "+
				"the spinning pairs are left out, since on one vCPU two spinning processes take turns at the scheduler's tick:\n\n%s",
				r.toolTable())
		}
	}
	return writeGenerated(filepath.Join(root, countsFile), "Instruction counts, goverbs against rdma-core", b.String())
}

// The files make bench writes whole, relative to the module root.
const (
	resultsFile = "docs/performance-results.md"
	countsFile  = "docs/performance-counts.md"
	chartFile   = "docs/performance.svg"
)

// generatedLine opens every file make bench writes.
const generatedLine = "<!-- generated by make bench; do not edit -->"

// writeGenerated writes the Markdown file at p whole: generatedLine, a
// title, and body.
func writeGenerated(p, title, body string) error {
	text := generatedLine + "\n\n# " + title + "\n\n" + strings.TrimRight(body, "\n") + "\n"
	return os.WriteFile(p, []byte(text), 0o644)
}

// toolTable prints rdma-core's tools beside goverbs', as Markdown.
func (r *benchResult) toolTable() string {
	var b strings.Builder
	b.WriteString("| test | figure | rdma-core | goverbs | goverbs / rdma-core | target |\n|---|---|---|---|---|---|\n")
	for _, t := range r.toolRows() {
		rs := "missing"
		if !math.IsNaN(t.ratio) {
			rs = fmt.Sprintf("%.2f×", t.ratio)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", t.test, t.fig.name, num(t.c), num(t.g), rs, verdict(t.ratio, t.fig.target, t.fig.lower))
	}
	return b.String()
}

// toolRow is one figure of one tool pair: the medians and their ratio.
type toolRow struct {
	test  string // "send_lat 64B"
	key   string // "send_lat"
	fig   benchFigure
	c, g  float64
	ratio float64
}

func (r *benchResult) toolRows() []toolRow {
	var rows []toolRow
	add := func(key, label string) {
		if !benchPairWanted(key) {
			return
		}
		for _, f := range benchFigures[toolKind(key)] {
			k := key + "/" + f.name
			c, g := median(r.ToolC[k]), median(r.ToolGo[k])
			rows = append(rows, toolRow{test: label, key: key, fig: f, c: c, g: g, ratio: g / c})
		}
	}
	for _, bp := range benchPairs {
		add(bp.test, fmt.Sprintf("%s %dB", bp.test, bp.size))
	}
	add("pingpong", "rc_pingpong 4096B")
	add("cmtime", fmt.Sprintf("cmtime %d connections", cmtimeConns))
	add("cmtime_steps", fmt.Sprintf("cmtime / goverbs cmtime -steps (rdmacm's low level), %d connections", cmtimeConns))
	add("stream_lat", "rstream -T b / goverbs stream, 64B ping-pong")
	add("stream_bw", "rstream -T b / goverbs stream, 64KiB bursts")
	add("stream_lat_spin", "rstream / goverbs stream -busypoll 1ms (both spin): 64B ping-pong")
	add("stream_bw_spin", "rstream / goverbs stream -busypoll 1ms (both spin): 64KiB bursts")
	add("stream_lat_tcp", "the same over TCP (-T s): 64B ping-pong")
	add("stream_bw_tcp", "the same over TCP (-T s): 64KiB bursts")
	return rows
}

// benchFiles takes the files the guest printed with "/init dump" out of
// its console.
func benchFiles(console []string) map[string][]byte {
	chunks := map[string]*strings.Builder{}
	files := map[string][]byte{}
	for _, l := range console {
		rest, ok := strings.CutPrefix(l, plan.MarkFile)
		if !ok {
			continue
		}
		name, data, ok := strings.Cut(strings.TrimSpace(rest), " ")
		if !ok || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
			continue
		}
		if chunks[name] == nil {
			chunks[name] = &strings.Builder{}
		}
		if data != "end" {
			chunks[name].WriteString(data)
			continue
		}
		if b, err := base64.StdEncoding.DecodeString(chunks[name].String()); err == nil {
			files[name] = b
		}
		delete(chunks, name)
	}
	return files
}

// benchReport prints each kernel's tables, writes the profiles, and, for
// a run that is all of make bench's, writes its generated files.
func benchReport(ctx context.Context, root string, runs []benchRun) error {
	var results []*benchResult
	for _, run := range runs {
		if run.res == nil {
			continue
		}
		r := parseBench(run.res.Console)
		r.Kernel = fmt.Sprintf("Linux %s (%s)", run.res.Release, run.res.Arch)
		r.Short, _, _ = strings.Cut(run.name, "/")
		results = append(results, r)
		if *flagBenchMicro > 0 {
			fmt.Printf("\nBenchmarks on %s (%s, TCG: compare only within one run):\n", run.name, run.res.Release)
			for _, l := range run.res.Console {
				if strings.HasPrefix(l, "Benchmark") || strings.HasPrefix(l, "cbench ") {
					fmt.Println("  " + l)
				}
			}
		}
		if *flagBenchMicro > 0 && *flagQemuIcount < 0 { // counted runs print their counts below
			fmt.Printf("\nHot paths on %s, goverbs against rdma-core:\n%s", run.name, r.microTable())
		}
		if *flagBenchTools {
			fmt.Printf("\nTools on %s, goverbs against rdma-core:\n%s", run.name, r.toolTable())
		}
		if *flagBenchProf != "" {
			files := benchFiles(run.res.Console)
			dir := filepath.Join(*flagBenchProf, strings.ReplaceAll(run.name, "/", "-"))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			for name, data := range files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					return err
				}
			}
			fmt.Printf("\n%d CPU profiles in %s (go tool pprof -top %s/<file>)\n", len(files), dir, dir)
		}
	}
	if *flagQemuIcount >= 0 {
		for _, r := range results {
			fmt.Printf("\nInstructions on %s, goverbs against rdma-core:\n%s", r.Short, r.countTable())
		}
		if len(results) == 0 || !fullCount() {
			return nil
		}
		if err := writeCounts(root, results); err != nil {
			return err
		}
		fmt.Println("\nwrote " + countsFile)
		return nil
	}
	if len(results) == 0 || partialBench() {
		return nil
	}
	if err := writePerformance(root, results, hostBench(ctx, root)); err != nil {
		return err
	}
	svg := benchSVG(results, time.Now().UTC().Format("2006-01-02"))
	if err := os.WriteFile(filepath.Join(root, chartFile), []byte(svg), 0o644); err != nil {
		return err
	}
	fmt.Println("\nwrote " + resultsFile + " and " + chartFile)
	return nil
}

// hostBench runs the mlx5 provider's benchmarks on the host, where the
// test plays the device (provider/mlx5/bench_linux_test.go): natively,
// not under TCG, so their figures compare with nothing above. It returns
// the Markdown table, or a line saying why there is none.
func hostBench(ctx context.Context, root string) string {
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run=^$", "-bench=Mlx5", "-benchmem", "-benchtime=200ms", "./provider/mlx5/")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("The mlx5 benchmarks failed: %v\n\n```\n%s\n```\n", err, strings.TrimSpace(string(out)))
	}
	fmt.Printf("\nmlx5 provider benchmarks on the host (the test plays the device):\n%s", out)
	return mlx5Table(strings.Split(string(out), "\n"))
}

// mlx5Unit says what one op of each mlx5 benchmark is.
var mlx5Unit = map[string]string{
	"Mlx5PollEmpty": "ns per empty poll", "Mlx5ReqNotify": "ns per arm",
	"Mlx5PollCQE/batch=1": "ns per CQE", "Mlx5PollCQE/batch=16": "ns per CQE", "Mlx5PollCQE/batch=64": "ns per CQE",
	"Mlx5PostSend/batch=1": "ns per WQE", "Mlx5PostSend/batch=16": "ns per WQE", "Mlx5PostRecv": "ns per WQE",
	"Mlx5PostSendInline/size=8/batch=1": "ns per WQE", "Mlx5PostSendInline/size=8/batch=16": "ns per WQE",
	"Mlx5PostSendInline/size=64/batch=1": "ns per WQE", "Mlx5PostSendInline/size=64/batch=16": "ns per WQE",
	"Mlx5PostSendInline/size=200/batch=1": "ns per WQE", "Mlx5PostSendInline/size=200/batch=16": "ns per WQE",
	"Mlx5PostSendUD/batch=1": "ns per WQE", "Mlx5PostSendUD/batch=16": "ns per WQE",
	"Mlx5PollRecvCQE/batch=1": "ns per CQE", "Mlx5PollRecvCQE/batch=16": "ns per CQE",
	"Mlx5PostSendAtomic/batch=1": "ns per WQE", "Mlx5PostSendAtomic/batch=16": "ns per WQE",
}

// mlx5Table turns go test's output into Markdown.
func mlx5Table(lines []string) string {
	var b strings.Builder
	cpu := ""
	for _, l := range lines {
		if c, ok := strings.CutPrefix(l, "cpu: "); ok {
			cpu = c
		}
	}
	fmt.Fprintf(&b, "On the host (%s, %s/%s), natively: no TCG, and no C to compare with (rdma-core's mlx5 needs a ConnectX).\n\n",
		orNone(cpu), runtime.GOOS, runtime.GOARCH)
	b.WriteString("| benchmark | figure | allocs/op |\n|---|---|---|\n")
	for _, l := range lines {
		m := goBenchRow.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		f := strings.Fields(m[2])
		var ns, perCQE, allocs string
		for i := 0; i+1 < len(f); i += 2 {
			switch f[i+1] {
			case "ns/op":
				ns = f[i]
			case "ns/CQE": // the drains time themselves: ns/op counts the fills too
				perCQE = f[i]
			case "allocs/op":
				allocs = f[i]
			}
		}
		unit := mlx5Unit[m[1]]
		if perCQE != "" {
			ns, unit = perCQE, "ns per CQE"
		}
		if unit == "" {
			unit = "ns/op"
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s |\n", m[1], ns, unit, allocs)
	}
	return b.String()
}

// benchRun is one bench VM's outcome.
type benchRun struct {
	name string // "6.1/amd64"
	res  *vmResult
}

// writePerformance writes docs/performance-results.md whole: the
// tables of a full run.
func writePerformance(root string, results []*benchResult, mlx5 string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, QEMU TCG (`-cpu %s`) on a 2-core host, one VM per kernel. "+
		"**TCG timings are comparable only as ratios within one run**, never with real hardware "+
		"or across runs; how to read them: [PERFORMANCE.md](PERFORMANCE.md). The Go benchmarks ran %d times, each run between two runs of their C twins, "+
		"and each side's figure is its best run (load on the host only adds time). Each tool pair ran in "+
		"the order rdma-core, goverbs, goverbs, rdma-core (%d round(s)); each figure is the median "+
		"of its runs, each run %d iterations long for the latency pairs, %d for the bandwidth pairs and %d for the ping-pong; cmtime makes %d connections at once, then closes them. "+
		"Targets: latency (median and p99) ≤ 1.0×, message rate ≥ 1.0×, connection setup and teardown ≤ 1.0×, poll per "+
		"CQE ≤ 0.9×, empty poll ≤ 0.8×, no allocations.\n\n![goverbs against rdma-core](performance.svg)\n\n",
		time.Now().UTC().Format("2006-01-02"), qemuCPU("bench"), max(*flagBenchMicro, 1), *flagBenchRounds,
		latIters, bwIters, pingpongIters, cmtimeConns)
	for _, r := range results {
		fmt.Fprintf(&b, "## %s\n\nHot paths: the Go benchmarks (test/bench) and the same loops in C through libibverbs (test/bench/testdata/cbench.c):\n\n%s\n", r.Kernel, r.microTable())
		fmt.Fprintf(&b, "Tools: perftest beside `goverbs perf`, `ibv_rc_pingpong` beside `goverbs pingpong`, librdmacm's `cmtime` beside `goverbs cmtime`, rsockets' `rstream` beside `goverbs stream` (rdmanet; both blocking, then both spinning, %d round trips, bursts of %d), same parameters:\n\n%s\n", streamLatIters, streamBWCount, r.toolTable())
	}
	fmt.Fprintf(&b, "## mlx5 provider, the test playing the device (provider/mlx5/bench_linux_test.go)\n\n%s\n", mlx5)
	return writeGenerated(filepath.Join(root, resultsFile), "goverbs against rdma-core, side by side (`make bench`)", b.String())
}
