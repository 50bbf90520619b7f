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
// goverbs pingpong. Each pair runs in both orders (rdma-core, goverbs,
// goverbs, rdma-core) to cancel drift. The host turns the console into
// ratio tables in docs/PERFORMANCE.md and a chart, docs/performance.svg.

// noCheckptr is set in bench mode: -d=checkptr instruments every unsafe
// conversion, which the hot paths make, so benchmarks run without it.
var noCheckptr bool

var (
	flagBenchRounds      = flag.Int("benchrounds", 2, "bench mode: rounds of each rdma-core/goverbs pair; each round runs both orders (C, Go, Go, C), and the tables take the median")
	flagBenchMicro       = flag.Int("benchmicro", 3, "bench mode: runs of the Go benchmarks, each after a run of their C twins (and one more C run at the end); the tables take each side's best; 0 runs none of them and writes no tables")
	flagBenchTools       = flag.Bool("benchtools", true, "bench mode: run the tool pairs (perftest, ibv_rc_pingpong); false runs only the Go benchmarks and their C twins")
	flagBenchProf        = flag.String("benchprofile", "", "bench mode: take CPU profiles in the guest (the Go benchmarks, and a long goverbs perf client per test, outside the tables) and write them into this `directory` on the host")
	flagBenchNoSig       = flag.Bool("benchnopreempt", true, "bench mode: after each run of the Go benchmarks, run the poll benchmarks once more with GODEBUG=asyncpreemptoff=1 (the rows \"no preemption signal\")")
	flagBenchPin         = flag.Bool("benchpin", false, "bench mode: run each tool pair's server on CPU 1 and its client on CPU 0 (their affinity, every thread), both tools alike")
	flagBenchLatIters    = flag.Int("benchlatiters", 0, "bench mode: iterations of each latency pair's runs (send_lat, write_lat) instead of their default; the tables are then not written")
	flagBenchBwIters     = flag.Int("benchbwiters", 0, "bench mode: iterations of each bandwidth pair's runs (send_bw, write_bw) instead of their default; the tables are then not written")
	flagBenchPpIters     = flag.Int("benchppiters", 0, "bench mode: iterations of each ping-pong run instead of the default; the tables are then not written")
	flagBenchPairs       = flag.String("benchpairs", "", "bench mode: run only the tool pairs whose test (send_lat, write_lat, send_bw, write_bw, pingpong) matches this `regexp`; the tables are then not written")
	flagBenchMicroKProf  = flag.String("benchmicrokprof", "", "bench mode: for the Go benchmarks matching this `regexp` (as -test.bench, without Benchmark), one more run of them and of their C twins (outside the tables) with the guest sampled on every CPU, kernel and user: the console shows each process's share and the kernel functions; under -qemuicount, a share of the instructions executed")
	flagBenchMicroKProfX = flag.String("benchmicrokprofx", "", "bench mode, with -benchmicrokprof: run its profiles at these fixed `counts` of iterations (comma-separated), the Go benchmark with -test.benchtime=Nx and cbench with the count as its third argument; two counts' difference is the loop's share without the start-up's")
	flagBenchMicroWrap   = flag.String("benchmicrowrap", "", "bench mode, with -benchmicrokprof: run its steps under this `command` (space-separated words before the benchmark's argv), such as \"valgrind --tool=callgrind --callgrind-out-file=/dev/null\" (with -guestpkgs=valgrind): then, at two -benchmicrokprofx counts, the difference of the instructions it reports is the loop's user-mode instructions")
	flagBenchKProbes     = flag.String("benchkprobes", "", "bench mode, with -benchmicrokprof: count the calls of these kernel `functions` (comma-separated; a kprobe on each) over each of its steps, exactly, where its samples are a profile's")
	flagBenchFetch       = flag.String("benchfetch", "", "bench mode, with -benchprofile: also copy these guest `files` (comma-separated) into its directory at the end, such as a callgrind output that -benchmicrowrap wrote")
	flagBenchTrace       = flag.String("benchtrace", "", "bench mode, with -benchprofile: for the perftest tests matching this `regexp`, -benchrounds more rounds of runs (C, Go, Go, C; outside the tables) with the scheduler's and workqueues' events traced on every CPU (tracefs), each trace's text gzipped into the profile directory")
	flagBenchInterfere   = flag.Int("benchinterfere", 0, "bench mode: this many rounds of a test of other loads' effect on kernel work: rdma-core's PostPoll and ReqNotify (cbench, on CPU 0), alone, beside goverbs' empty poll loop (BenchmarkPollEmpty) and beside rdma-core's (cbench PollEmpty), both on CPU 1, and beside another process waking 100 and 1,000 times a second on CPU 0; outside the tables")
	flagBenchTraceGoEnv  = flag.String("benchtracegoenv", "", "bench mode, with -benchtrace: add this `VAR=value` to the environment of the goverbs runs of every second round (rounds 1, 3, …), to compare a setting with the default in one VM run")
	flagBenchTraceCIdle  = flag.Bool("benchtracecidle", false, "bench mode, with -benchtrace: run the rdma-core tools of every second round (rounds 1, 3, …) with one idle thread started in them (LD_PRELOAD of test/bench/testdata/idlethread.c), so that they are multithreaded as Go programs are")
	flagBenchKProf       = flag.String("benchkprof", "", "bench mode: for the perftest tests matching this `regexp`, one long run of perftest and one of goverbs perf (outside the tables) with the guest's kernel sampled on every CPU; the console shows where the time went, by process and kernel function")
)

// kprofHz is the sampling rate of -benchkprof's kernel profiles, per CPU.
const kprofHz = 1000

// microKProfHz is the sampling rate of -benchmicrokprof's profiles, per
// CPU: a prime, so that the period (in ns, or instructions under
// -qemuicount) does not keep step with a benchmark's loop.
const microKProfHz = 49993

// kprofLength is how many times longer than the tables' runs the
// -benchkprof runs are, for enough samples of the measured loop against
// the setup's.
const kprofLength = 10

// benchPairs are the perftest measurements: perftest's tool and goverbs
// perf with the same parameters.
//
// The latency runs are 20,000 iterations long (latIters), where perftest's
// default is 1,000. Their p99 is a target, and at 2,000 iterations it was
// the 20th-slowest sample of a run of 20 ms (6.1) to 55 ms (6.12): 5 to 15
// of the guest's 4 ms timer ticks, each of which stalls one iteration
// (tens of µs on 6.1, up to milliseconds on 6.12), so the p99 of a run
// followed the count of ticks it happened to span (write_lat's ratio moved
// from 0.50x to 1.17x between VM runs of the same code). At 20,000 every
// run spans 50 to 150 ticks.
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

// length is how many iterations the pair's runs take: its default, or
// -benchlatiters or -benchbwiters where set for its kind.
func (bp benchPair) length() int {
	switch {
	case *flagBenchLatIters > 0 && strings.HasSuffix(bp.test, "_lat"):
		return *flagBenchLatIters
	case *flagBenchBwIters > 0 && strings.HasSuffix(bp.test, "_bw"):
		return *flagBenchBwIters
	}
	return bp.iters
}

// latIters is the length of each latency pair's runs (-benchlatiters
// overrides it, outside the tables).
const latIters = 20000

// bwIters is the length of each bandwidth pair's runs.
const bwIters = 5000

// pingpongIters is the length of each ibv_rc_pingpong run (its default
// size, 4096 bytes, and receive depth, 500).
const pingpongIters = 2000

// benchGuestCBench is where the C twin of the Go benchmarks lies in the guest.
const benchGuestCBench = "/bin/cbench"

// benchGuestIdleThread is where -benchtracecidle's preloaded library lies
// in the guest.
const benchGuestIdleThread = "/lib/goverbs-idlethread.so"

// buildIdleThread compiles test/bench/testdata/idlethread.c into a shared
// library with the host's gcc (there since buildCBench), for
// -benchtracecidle; "" when it cannot, having said why.
func buildIdleThread(ctx context.Context, root, dir, arch string) string {
	if arch != runtime.GOARCH {
		logf("%s: no idle-thread library: the host's gcc targets %s", arch, runtime.GOARCH)
		return ""
	}
	out := filepath.Join(dir, "idlethread.so")
	if err := run(ctx, "", "gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", out,
		filepath.Join(root, "test", "bench", "testdata", "idlethread.c"), "-lpthread"); err != nil {
		logf("%s: no idle-thread library: %v", arch, err)
		return ""
	}
	return out
}

// buildCBench compiles test/bench/testdata/cbench.c on the host with gcc,
// against the libibverbs-dev of the rdma-core that the guest runs (its
// headers) and that guest's libibverbs.so.1. It returns "" and says why
// when it cannot: then the Go benchmarks run without their C twins.
func buildCBench(ctx context.Context, a *apt, root, dir, arch string, pkgDirs []string) string {
	if arch != runtime.GOARCH {
		logf("%s: no C benchmarks: cbench.c is compiled with the host's gcc, which targets %s", arch, runtime.GOARCH)
		return ""
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		logf("installing gcc with apt-get (for test/bench/testdata/cbench.c)")
		if err := asRootEnv(ctx, []string{"install", "-y", "-qq", "gcc", "libc6-dev"}); err != nil {
			logf("%s: no C benchmarks: gcc: %v", arch, err)
			return ""
		}
	}
	info, err := a.show(ctx, "libibverbs-dev", debArch(arch))
	if err == nil {
		var deb string
		if deb, err = a.download(ctx, info); err == nil {
			var dev string
			if dev, err = a.unpack(ctx, deb); err == nil {
				out := filepath.Join(dir, "cbench")
				args := []string{"-O2", "-Wall", "-o", out, filepath.Join(root, "test", "bench", "testdata", "cbench.c"),
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
	logf("%s: no C benchmarks: %v", arch, err)
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
			if *flagBenchNoSig {
				steps = append(steps, noPreemptStep(t, r))
			}
		}
	}
	if cbench && *flagBenchMicro > 0 {
		steps = append(steps, c(*flagBenchMicro))
	}
	if re := *flagBenchMicroKProf; re != "" && len(tests) > 0 {
		// One pair of runs per length: with -benchmicrokprofx, each a
		// fixed count of iterations, so that the difference of two
		// lengths' samples is the loop's alone, without the start-up.
		lengths := []string{""}
		if *flagBenchMicroKProfX != "" {
			lengths = strings.Split(*flagBenchMicroKProfX, ",")
		}
		// profiled makes s one of these runs: named, sampled, wrapped,
		// probed, and its samples kept with -benchprofile.
		profiled := func(s plan.Step, side, n string) plan.Step {
			s.Name = "kprof " + side + strings.TrimSuffix(" x"+n, " x")
			s.Argv = append(strings.Fields(*flagBenchMicroWrap), s.Argv...)
			s.KProfileHz = microKProfHz
			s.KProbes = splitList(*flagBenchKProbes)
			if *flagBenchProf != "" {
				s.KProfileOut = "/tmp/kprof-" + side + n + ".folded"
				profiles = append(profiles, s.KProfileOut)
			}
			return s
		}
		for _, n := range lengths {
			t := tests[0]
			t.Argv = nil
			for _, a := range tests[0].Argv {
				switch {
				case strings.HasPrefix(a, "-test.bench="):
					a = "-test.bench=^Benchmark(" + re + ")$"
				case strings.HasPrefix(a, "-test.benchtime=") && n != "":
					a = "-test.benchtime=" + n + "x"
				case strings.HasPrefix(a, "-test.cpuprofile="):
					continue
				}
				t.Argv = append(t.Argv, a)
			}
			steps = append(steps, profiled(t, "gobench", n))
			if cbench {
				s := c(*flagBenchMicro + 1)
				s.Argv = append(s.Argv, re)
				if n != "" {
					s.Argv = append(s.Argv, n)
				}
				steps = append(steps, profiled(s, "cbench", n))
			}
		}
	}
	port := 20000
	if *flagBenchKProf != "" {
		re := regexp.MustCompile(*flagBenchKProf) // checked in main
		for _, bp := range benchPairs {
			if !re.MatchString(bp.test) {
				continue
			}
			for _, side := range []string{"c", "go"} {
				port++
				argv, lib := bp.goverbsArgv(kprofLength*bp.iters), ""
				if side == "c" {
					argv, lib = bp.perftestArgv(kprofLength*bp.iters), libPath
				}
				argv = append(argv, "-p", fmt.Sprint(port))
				tag := "kprof " + bp.test + " " + side
				folded := ""
				if *flagBenchProf != "" {
					folded = "/tmp/kprof-" + bp.test + "-" + side + ".folded"
					profiles = append(profiles, folded)
				}
				steps = append(steps,
					plan.Step{Name: tag + " server", Argv: argv, LibPath: lib, Background: true, Prefix: "  " + tag + " server| ", TimeoutSec: 300},
					plan.Step{Name: tag + " client", Argv: append(slices.Clone(argv), "127.0.0.1"), LibPath: lib, DelayMs: 1000,
						Prefix: "  " + tag + " client| ", TimeoutSec: 300, Counters: rxeCounters, KProfileHz: kprofHz, KProfileOut: folded})
			}
		}
	}
	if *flagBenchTrace != "" {
		steps = append(steps, traceSteps(&port, libPath, &profiles)...)
	}
	if *flagBenchInterfere > 0 && cbench && len(tests) > 0 {
		steps = append(steps, interfereSteps(tests[0], libPath)...)
	}
	if *flagBenchTools {
		steps = append(steps, toolSteps(&port, libPath, prof)...)
	}
	if *flagBenchProf != "" {
		profiles = append(profiles, splitList(*flagBenchFetch)...)
	}
	if len(profiles) > 0 {
		// A few MB each through the serial console: -benchtrace's traces
		// (2.5 MB gzipped) took about 12 s each.
		steps = append(steps, plan.Step{Name: "profiles out", Argv: append([]string{"/init", "dump"}, profiles...), TimeoutSec: 60 + 30*len(profiles)})
	}
	return steps
}

// interfereSteps is -benchinterfere's runs. Each round runs the victim,
// rdma-core's PostPoll and ReqNotify from cbench at fixed counts on CPU 0,
// five times: with nothing of the benchmarks' beside it; beside goverbs'
// empty poll loop (the Go benchmark PollEmpty, a loop like the one each
// side of a latency pair spins in while it waits) on CPU 1; beside
// rdma-core's (cbench's PollEmpty) on CPU 1; and beside another process
// waking 100 and 1,000 times a second on CPU 0 itself (/init tick), each
// wakeup switching the CPU's address space there and back. The victim's
// code is the same in all five, so a change in its ns/op is the other
// load's doing, through the emulator or the host's core. (On 6.1 rxe does
// PostPoll's work on the poster's CPU; on 6.12 kworkers may take it to
// the other.)
func interfereSteps(gotest plan.Step, libPath string) []plan.Step {
	var steps []plan.Step
	const aggressorSec = 5
	victim := func(r int, beside string, delay int) plan.Step {
		return plan.Step{Name: fmt.Sprintf("interfere #%d victim beside %s", r, beside), LibPath: libPath, TimeoutSec: 120,
			Argv: []string{benchGuestCBench, "rxe0", "PostPoll|ReqNotify", "20000"}, CPUs: []int{0}, DelayMs: delay,
			Prefix: fmt.Sprintf("  interfere #%d beside %s| ", r, beside)}
	}
	aggressor := func(r int, name string, argv []string, cpu int) plan.Step {
		return plan.Step{Name: fmt.Sprintf("interfere #%d aggressor %s", r, name), Argv: argv, Background: true,
			CPUs: []int{cpu}, TimeoutSec: 60, DelayMs: (aggressorSec + 1) * 1000, // the last one is done
			Prefix: fmt.Sprintf("  interfere #%d aggressor %s| ", r, name)}
	}
	goArgv := []string{gotest.Argv[0], "-test.run=^$", "-test.bench=^BenchmarkPollEmpty$", fmt.Sprintf("-test.benchtime=%ds", aggressorSec)}
	d := fmt.Sprintf("%ds", aggressorSec)
	for r := range *flagBenchInterfere {
		none := victim(r, "none", 0)
		if r > 0 {
			none.DelayMs = (aggressorSec + 1) * 1000
		}
		g := aggressor(r, "go", goArgv, 1)
		g.Dir, g.Env, g.DelayMs = gotest.Dir, gotest.Env, 0
		c := aggressor(r, "c", []string{benchGuestCBench, "rxe0", "PollEmpty", "120000000"}, 1)
		c.LibPath = libPath
		steps = append(steps, none,
			g, victim(r, "go", 1500),
			c, victim(r, "c", 1500),
			aggressor(r, "tick100", []string{"/init", "tick", "10ms", d}, 0), victim(r, "tick100", 1500),
			aggressor(r, "tick1000", []string{"/init", "tick", "1ms", d}, 0), victim(r, "tick1000", 1500))
	}
	return steps
}

// traceEvents are the kernel events -benchtrace records: who ran on each
// CPU and when, whom each wakeup woke and where, tasks moved between CPUs,
// the timer tick, the TLB flushes (x86; each costs QEMU's emulated TLB),
// and the work items queued and run (rxe's tasks run as work items on
// 6.12).
var traceEvents = []string{
	"sched/sched_switch", "sched/sched_wakeup", "sched/sched_wakeup_new", "sched/sched_migrate_task",
	"irq_vectors/local_timer_entry", "tlb/tlb_flush",
	"workqueue/workqueue_queue_work", "workqueue/workqueue_execute_start",
}

// traceBootArgs is the kernel command line's part for -benchtrace: its
// events enabled at boot, before the second CPU runs, and not by /init
// later. Enabling a tracepoint patches kernel text while the other vCPU
// may run it, and under QEMU's TCG that panicked the guest twice (an int3
// in ttwu_do_activate, then in __sysvec_apic_timer_interrupt), once on
// the first enable of a run.
func traceBootArgs() string {
	if *flagBenchTrace == "" {
		return ""
	}
	events := make([]string, len(traceEvents))
	for i, e := range traceEvents {
		events[i] = strings.Replace(e, "/", ":", 1)
	}
	return " trace_event=" + strings.Join(events, ",")
}

// traceSteps is -benchtrace's runs: per matching perftest test,
// -benchrounds rounds of its pair (C, Go, Go, C) at the tables' length, outside the tables,
// each client's step traced into /tmp/trace-<test>-<side><n>.txt.gz,
// which it adds to profiles to be copied out.
func traceSteps(port *int, libPath string, profiles *[]string) []plan.Step {
	re := regexp.MustCompile(*flagBenchTrace) // checked in main
	var steps []plan.Step
	for _, bp := range benchPairs {
		if !re.MatchString(bp.test) {
			continue
		}
		bp.iters = bp.length()
		for n := range 4 * *flagBenchRounds {
			side := []string{"c", "go", "go", "c"}[n%4]
			*port++
			argv, lib := bp.goverbsArgv(bp.iters), ""
			if side == "c" {
				argv, lib = bp.perftestArgv(bp.iters), libPath
			}
			argv = append(argv, "-p", fmt.Sprint(*port))
			var env []string
			if side == "go" && *flagBenchTraceGoEnv != "" && (n/4)%2 == 1 {
				env, side = []string{*flagBenchTraceGoEnv}, "goenv"
			}
			if side == "c" && *flagBenchTraceCIdle && (n/4)%2 == 1 {
				env, side = []string{"LD_PRELOAD=" + benchGuestIdleThread}, "cidle"
			}
			tag := fmt.Sprintf("trace %s %s #%d", bp.test, side, n)
			out := fmt.Sprintf("/tmp/trace-%s-%s%d.txt.gz", bp.test, side, n)
			*profiles = append(*profiles, out)
			srv := plan.Step{Name: tag + " server", Argv: argv, Env: env, LibPath: lib, Background: true, Prefix: "  " + tag + " server| ", TimeoutSec: 300}
			cl := plan.Step{Name: tag + " client", Argv: append(slices.Clone(argv), "127.0.0.1"), Env: env, LibPath: lib, DelayMs: 1000,
				Prefix: "  " + tag + " client| ", TimeoutSec: 300, Counters: rxeCounters, Trace: traceEvents, TraceOut: out}
			if *flagBenchPin {
				srv.CPUs, cl.CPUs = []int{1}, []int{0}
			}
			steps = append(steps, srv, cl)
		}
	}
	return steps
}

// noSignal marks the Go benchmarks run with GODEBUG=asyncpreemptoff=1:
// the prefix of their console lines, and the suffix of their names in
// benchResult.
const (
	noSignalPrefix = "nopreempt| "
	noSignalSuffix = "@nopreempt"
)

// noPreemptBench is the -test.bench pattern of the run without the
// preemption signal, unless -run names one: the drain benchmarks. (The
// pattern meets the function's whole name, Benchmark included.)
const noPreemptBench = "^BenchmarkPollDrain(Single)?$"

// noPreemptStep is the Go benchmark step t (run r) again, the poll
// benchmarks only, with the runtime's asynchronous preemption off.
//
// Why: every 10 ms the Go runtime preempts a goroutine that has run that
// long (a busy poll loop, a drain benchmark) with a signal, and under
// QEMU's TCG each such signal costs the vCPU its emulated TLB and
// translated-code jump cache, measured with -qemustats (docs/PERFORMANCE-LOG.md).
// The drain after it walks its ring pages and code with both cold; C's
// drain, with no runtime, never pays that. On hardware a signal costs
// microseconds every 10 ms. The tables show both runs, the targets
// judged on the first (the runtime as it comes).
func noPreemptStep(t plan.Step, r int) plan.Step {
	t.Name = fmt.Sprintf("%s (GODEBUG=asyncpreemptoff=1)", strings.TrimSuffix(t.Name, fmt.Sprintf(" #%d", r))) + fmt.Sprintf(" #%d", r)
	argv := make([]string, 0, len(t.Argv))
	for _, a := range t.Argv {
		if strings.HasPrefix(a, "-test.cpuprofile=") {
			continue
		}
		if strings.HasPrefix(a, "-test.bench=") && *flagRun == "" {
			a = "-test.bench=" + noPreemptBench
		}
		argv = append(argv, a)
	}
	t.Argv = argv
	t.Env = append(slices.Clone(t.Env), "GODEBUG=asyncpreemptoff=1")
	t.Prefix = noSignalPrefix
	return t
}

// toolSteps is the tool pairs of a bench VM (rdma-core's, then goverbs',
// in both orders), and with -benchprofile one long goverbs perf client
// per test, its CPU profile named by prof.
func toolSteps(port *int, libPath string, prof func(string) string) []plan.Step {
	var steps []plan.Step
	pair := func(test string, c, g []string, client func(argv []string) []string) {
		if !benchPairWanted(test) {
			return
		}
		for r := 0; r < *flagBenchRounds; r++ {
			for i, side := range []string{"c", "go", "go", "c"} {
				*port++
				n := 4*r + i
				argv, lib := slices.Clone(g), ""
				if side == "c" {
					argv, lib = slices.Clone(c), libPath
				}
				argv = append(argv, "-p", fmt.Sprint(*port))
				tag := fmt.Sprintf("bench %s %s #%d", test, side, n)
				cli := client(slices.Clone(argv))
				srv, cl := plan.Step{Name: tag + " server", Argv: argv, LibPath: lib, Background: true, Prefix: "  " + tag + " server| ", TimeoutSec: 120},
					plan.Step{Name: tag + " client", Argv: cli, LibPath: lib,
						DelayMs: 1000, Prefix: "  " + tag + " client| ", TimeoutSec: 120, Counters: rxeCounters}
				if *flagBenchPin {
					srv.CPUs, cl.CPUs = []int{1}, []int{0}
				}
				steps = append(steps, srv, cl)
			}
		}
	}
	toClient := func(argv []string) []string { return append(argv, "127.0.0.1") }
	for _, bp := range benchPairs {
		n := bp.length()
		pair(bp.test, bp.perftestArgv(n), bp.goverbsArgv(n), toClient)
	}
	ppn := pingpongIters
	if *flagBenchPpIters > 0 {
		ppn = *flagBenchPpIters
	}
	pp := []string{"-d", "rxe0", "-g", "1", "-n", fmt.Sprint(ppn)}
	pair("pingpong", append([]string{"/usr/bin/ibv_rc_pingpong"}, pp...), append([]string{"/bin/goverbs", "pingpong"}, pp...), toClient)
	// Profiles need longer runs than the pairs (100 samples a second):
	// one goverbs perf run per test, 25 times as long, outside the tables.
	for _, bp := range benchPairs {
		p := prof("perf-" + bp.test)
		if p == "" {
			break
		}
		*port++
		argv := append(bp.goverbsArgv(25*bp.iters), "-p", fmt.Sprint(*port))
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
// (-run, -benchmicro=0, -benchpairs, -benchtools=false), change its runs'
// lengths (-benchlatiters, -benchbwiters, -benchppiters) or measure
// something else than its timings (-qemuicount): then its tables are not
// written, since they would stand for a run that did not happen.
func partialBench() bool {
	return *flagRun != "" || *flagBenchMicro <= 0 || *flagBenchPairs != "" || *flagBenchLatIters > 0 || *flagBenchBwIters > 0 || *flagBenchPpIters > 0 || !*flagBenchTools || *flagQemuIcount >= 0
}

// fullCount reports whether a -qemuicount bench run counted every Go
// benchmark (no -run, -benchmicro at least 1), so that its counts may
// replace the ones in docs/PERFORMANCE.md; the tool pairs and the runs
// without the preemption signal are not part of them.
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
}

// microTargets are the ratios goverbs / rdma-core the Go benchmarks must
// meet (at most), keyed by benchmark name.
var microTargets = map[string]float64{
	"PollEmpty":          0.8,
	"PollDrain/batch=1":  0.9,
	"PollDrain/batch=16": 0.9,
	"PollDrain/batch=64": 0.9,
	// The same target, for the poll with no lock: what cq.WithSingleThreaded
	// gives a caller that promises one goroutine.
	"PollDrainSingle/batch=1":  0.9,
	"PollDrainSingle/batch=16": 0.9,
	"PollDrainSingle/batch=64": 0.9,
}

// cTwin names the C benchmark a Go benchmark is compared with: itself,
// but for the single-threaded CQ's drains, whose twin is the plain drain
// (rdma-core's rxe provider locks its CQ in every poll, whatever
// IBV_CREATE_CQ_ATTR_SINGLE_THREADED says: rxe_create_cq_ex ignores it).
func cTwin(name string) string {
	name = baseName(name)
	if rest, ok := strings.CutPrefix(name, "PollDrainSingle/"); ok {
		return "PollDrain/" + rest
	}
	return name
}

// baseName is a Go benchmark's name without noSignalSuffix.
func baseName(name string) string { return strings.TrimSuffix(name, noSignalSuffix) }

// microUnit is the unit each Go benchmark is compared in.
var microUnit = map[string]string{
	"PollEmpty":                "ns/op",
	"PollDrain/batch=1":        "ns/CQE",
	"PollDrain/batch=16":       "ns/CQE",
	"PollDrain/batch=64":       "ns/CQE",
	"PollDrainSingle/batch=1":  "ns/CQE",
	"PollDrainSingle/batch=16": "ns/CQE",
	"PollDrainSingle/batch=64": "ns/CQE",
	"ReqNotify":                "ns/op",
	"EventRoundTrip":           "ns/op",
	"PostPoll":                 "ns/op",
	"PostSend":                 "ns/WR",
	"PostRecv":                 "ns/WR",
}

var microOrder = []string{"PollEmpty", "PollDrain/batch=1", "PollDrain/batch=16", "PollDrain/batch=64",
	"PollDrainSingle/batch=1", "PollDrainSingle/batch=16", "PollDrainSingle/batch=64",
	"ReqNotify", "EventRoundTrip", "PostPoll", "PostSend", "PostRecv",
	"PollDrain/batch=1" + noSignalSuffix, "PollDrain/batch=16" + noSignalSuffix, "PollDrain/batch=64" + noSignalSuffix,
	"PollDrainSingle/batch=1" + noSignalSuffix, "PollDrainSingle/batch=16" + noSignalSuffix, "PollDrainSingle/batch=64" + noSignalSuffix}

// microLabel says in words what each Go benchmark measures.
var microLabel = map[string]string{
	"PollEmpty":                "empty poll",
	"PollDrain/batch=1":        "poll per CQE, batch 1",
	"PollDrain/batch=16":       "poll per CQE, batch 16",
	"PollDrain/batch=64":       "poll per CQE, batch 64",
	"PollDrainSingle/batch=1":  "poll per CQE, batch 1, single-threaded CQ (C: rxe's poll, which always locks)",
	"PollDrainSingle/batch=16": "poll per CQE, batch 16, single-threaded CQ (C: the same)",
	"PollDrainSingle/batch=64": "poll per CQE, batch 64, single-threaded CQ (C: the same)",
	"ReqNotify":                "ReqNotify (REQ_NOTIFY_CQ write command)",
	"EventRoundTrip":           "event round trip: arm, post, wake, ack, poll",
	"PostPoll":                 "a latency tool's step: post one write, poll its completion",
	"PostSend":                 "PostSend per WR (batches of 32, one doorbell)",
	"PostRecv":                 "PostRecv per WR",

	"PollDrain/batch=1" + noSignalSuffix:        "poll per CQE, batch 1, no preemption signal (GODEBUG=asyncpreemptoff=1; C: the same drain)",
	"PollDrain/batch=16" + noSignalSuffix:       "poll per CQE, batch 16, no preemption signal",
	"PollDrain/batch=64" + noSignalSuffix:       "poll per CQE, batch 64, no preemption signal",
	"PollDrainSingle/batch=1" + noSignalSuffix:  "poll per CQE, batch 1, single-threaded CQ, no preemption signal",
	"PollDrainSingle/batch=16" + noSignalSuffix: "poll per CQE, batch 16, single-threaded CQ, no preemption signal",
	"PollDrainSingle/batch=64" + noSignalSuffix: "poll per CQE, batch 64, single-threaded CQ, no preemption signal",
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
	for _, l := range console {
		l = strings.TrimRight(l, " \t\r")
		suffix := ""
		if _, rest, ok := strings.Cut(l, noSignalPrefix); ok {
			l, suffix = rest, noSignalSuffix
		}
		if m := goBenchRow.FindStringSubmatch(l); m != nil {
			m[1] += suffix
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
				case unit == microUnit[baseName(m[1])]:
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
	return r
}

func toolKind(test string) string {
	switch {
	case test == "pingpong":
		return "pingpong"
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
		c, g := best(r.MicroC[cTwin(name)]), best(r.MicroGo[name])
		allocs := "–"
		if a, ok := r.Allocs[name]; ok {
			allocs = num(a)
		}
		ratio := g / c
		rs := "–"
		if !math.IsNaN(ratio) {
			rs = fmt.Sprintf("%.2f×", ratio)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", microLabel[name], microUnit[baseName(name)], num(c), num(g),
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
		c, g := best(r.MicroC[cTwin(name)]), best(r.MicroGo[name])
		if math.IsNaN(c) || math.IsNaN(g) {
			continue
		}
		_, per, _ := strings.Cut(microUnit[baseName(name)], "/")
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

// writeCounts replaces the instruction counts in docs/PERFORMANCE.md,
// between the count markers, with those of a -qemuicount run.
func writeCounts(root string, results []*benchResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, `make bench`'s counting run (`-qemuicount=0`: one vCPU, the guest's clock advancing one "+
		"nanosecond an instruction), the Go benchmarks once between two runs of their C twins; each side's "+
		"figure is its least run.\n", time.Now().UTC().Format("2006-01-02"))
	for _, r := range results {
		fmt.Fprintf(&b, "\n%s:\n\n%s", r.Kernel, r.countTable())
	}
	return replaceSection(filepath.Join(root, "docs", "PERFORMANCE.md"), "<!-- count:begin -->", "<!-- count:end -->", b.String())
}

// replaceSection puts text between the begin and end markers of the file
// at p, on lines of their own, or appends the markers and text when the
// file has none.
func replaceSection(p, begin, end, text string) error {
	old, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	sec := begin + "\n" + strings.TrimRight(text, "\n") + "\n" + end
	s := string(old)
	if i, j := strings.Index(s, begin), strings.Index(s, end); i >= 0 && j > i {
		s = s[:i] + sec + s[j+len(end):]
	} else {
		s = strings.TrimRight(s, "\n") + "\n\n" + sec + "\n"
	}
	return os.WriteFile(p, []byte(s), 0o644)
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

// benchReport prints each kernel's tables, writes the profiles, and (for
// a full run) writes docs/PERFORMANCE.md's tables and docs/performance.svg.
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
		fmt.Printf("\nBenchmarks on %s (%s, TCG: compare only within one run):\n", run.name, run.res.Release)
		for _, l := range run.res.Console {
			if strings.HasPrefix(l, "Benchmark") || strings.HasPrefix(l, "cbench ") {
				fmt.Println("  " + l)
			} else if _, rest, ok := strings.Cut(l, noSignalPrefix); ok && strings.HasPrefix(rest, "Benchmark") {
				fmt.Println("  " + rest + " (GODEBUG=asyncpreemptoff=1)")
			}
		}
		fmt.Printf("\nHot paths on %s, goverbs against rdma-core:\n%s", run.name, r.microTable())
		fmt.Printf("\nTools on %s, goverbs against rdma-core:\n%s", run.name, r.toolTable())
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
		if len(results) == 0 || !fullCount() {
			return nil
		}
		for _, r := range results {
			fmt.Printf("\nInstructions on %s, goverbs against rdma-core:\n%s", r.Short, r.countTable())
		}
		if err := writeCounts(root, results); err != nil {
			return err
		}
		fmt.Println("\nwrote the instruction counts into docs/PERFORMANCE.md")
		return nil
	}
	if len(results) == 0 || partialBench() {
		return nil
	}
	if err := writePerformance(root, results, hostBench(ctx, root)); err != nil {
		return err
	}
	svg := benchSVG(results, time.Now().UTC().Format("2006-01-02"))
	if err := os.WriteFile(filepath.Join(root, "docs", "performance.svg"), []byte(svg), 0o644); err != nil {
		return err
	}
	fmt.Println("\nwrote docs/PERFORMANCE.md and docs/performance.svg")
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

// writePerformance puts the tables into docs/PERFORMANCE.md, between
// markers, keeping the rest of the file.
func writePerformance(root string, results []*benchResult, mlx5 string) error {
	var b strings.Builder
	b.WriteString("## goverbs against rdma-core, side by side (`make bench`)\n\n")
	fmt.Fprintf(&b, "%s, QEMU TCG (`-cpu %s`: why, under \"The preemption signal\") on this project's 2-core machine, one VM per kernel. "+
		"**TCG timings are comparable only as ratios within one run**, never with real hardware "+
		"or across runs. The Go benchmarks ran %d times, each run between two runs of their C twins, "+
		"and each side's figure is its best run (load on the host only adds time). Each tool pair ran in "+
		"the order rdma-core, goverbs, goverbs, rdma-core (%d round(s)); each figure is the median "+
		"of its runs, each run %d iterations long for the latency pairs, %d for the bandwidth pairs and %d for the ping-pong. Targets: latency (median and p99) ≤ 1.0×, message rate ≥ 1.0×, poll per "+
		"CQE ≤ 0.9×, empty poll ≤ 0.8×, no allocations.\n\n![goverbs against rdma-core](performance.svg)\n\n",
		time.Now().UTC().Format("2006-01-02"), qemuCPU("bench"), max(*flagBenchMicro, 1), *flagBenchRounds,
		latIters, bwIters, pingpongIters)
	for _, r := range results {
		fmt.Fprintf(&b, "### %s\n\nHot paths: the Go benchmarks (test/bench) and the same loops in C through libibverbs (test/bench/testdata/cbench.c):\n\n%s\n", r.Kernel, r.microTable())
		fmt.Fprintf(&b, "Tools: perftest beside `goverbs perf`, `ibv_rc_pingpong` beside `goverbs pingpong`, same parameters:\n\n%s\n", r.toolTable())
	}
	fmt.Fprintf(&b, "### mlx5 provider, the test playing the device (provider/mlx5/bench_linux_test.go)\n\n%s\n", mlx5)
	return replaceSection(filepath.Join(root, "docs", "PERFORMANCE.md"), "<!-- bench:begin -->", "<!-- bench:end -->", b.String())
}
