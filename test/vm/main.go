// Command vm is goverbs' test harness on real kernels: it boots Debian's
// kernels under QEMU (TCG) with soft-RoCE (rdma_rxe) and runs our tests,
// built static for the guest, inside them.
//
// Usage:
//
//	go run ./test/vm [flags] [test|demo|fetch]
//
// test (the default) builds a test binary of every package, boots each
// kernel of -kernel for each architecture of -arch, and runs them all,
// after a smoke step that prints rdma-core's "ibv_devinfo -d rxe0". demo
// boots one VM and shows the device as goverbs and rdma-core find it,
// runs goverbs' tools against rdma-core's, and ends with an HTTP request
// served over RDMA (examples/rdmahttp).
// fetch only downloads and extracts what the others need. selftest boots
// broken guests (no /init, an /init that dies, a step that hangs) and
// checks that the harness fails each with a message that says so.
//
// Downloads (kernel images, rdma-core packages) come from apt-get
// download and are cached in $GOVERBS_CACHE, else $XDG_CACHE_HOME/goverbs,
// else ~/.cache/goverbs. Missing host tools (qemu-system-*, dpkg-deb, xz)
// are installed with apt-get.
//
// Inside the guest, /init sets GOVERBS_IN_VM=1, creates the netdev d0
// (dummy, 192.0.2.1/24 and 2001:db8::1/64) and the rxe device rxe0 on it, and runs each test
// binary in its package directory, so testdata/ is found.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/test/vm/internal/plan"
)

var (
	flagKernel  = flag.String("kernel", "6.1,6.12", "kernel series to boot, comma-separated (6.1, 6.12)")
	flagArch    = flag.String("arch", "amd64", "guest architectures, comma-separated (amd64, arm64)")
	flagVMs     = flag.String("vms", "", "exact kernel/arch pairs to boot, comma-separated (6.1/amd64,6.1/arm64); overrides -kernel and -arch")
	flagRun     = flag.String("run", "", "run only tests matching this regular expression (go test -run); bench mode: only the Go benchmarks matching it (go test -bench), and no tables written")
	flagCount   = flag.Int("count", 1, "test mode: run each test this many times (go test -count), for finding a test that fails only now and then")
	flagPkg     = flag.String("pkg", "./...", "packages whose tests run in the VM, comma-separated patterns")
	flagTimeout = flag.Duration("timeout", 15*time.Minute, "time limit for one VM, boot included; bench mode: 30m unless given")
	flagKeep    = flag.Bool("keep", false, "keep the work directory (initramfs, binaries) and print its path")
	flagQuiet   = flag.Bool("q", false, "do not pass -test.v to the test binaries")
	flagNoRDMA  = flag.Bool("no-rdma", false, "create no rxe device: device tests must then fail, not skip")
	flagTwoHost = flag.Bool("twohost", false, "two hosts in one guest: veth0 (192.0.2.1, rxe0) and veth1 (192.0.2.2, rxe1), the traffic between them across the pair, and sch_netem loaded to break it")
	flagBenchT  = flag.String("benchtime", "100ms", "bench mode: go test -benchtime for each benchmark")
	flagEnv     = flag.String("env", "", "KEY=VALUE pairs, comma-separated, added to the tests' environment in the guest")
	flagArchSet = flag.String("archset", "", "test mode, with the whole suite: guests of these architectures (comma-separated) run only archPackages, the packages whose code or ABI differs by architecture; make test sets arm64, make vmfull none")
	flagRace    = flag.Bool("race", false, "test mode: build the test binaries with the race detector (CGO_ENABLED=1 for them only; the host's loader and libc go into the guest); guests of another architecture than the host's run without it")
)

// guestPackages are Debian packages put into every guest: rdma-core's
// tools, to run beside ours as peers: ibverbs-utils (ibv_devinfo,
// ibv_rc_pingpong), rdmacm-utils (librdmacm's examples: rping, udaddy,
// ucmatose, rdma_server/rdma_client, cmtime, rstream) and perftest; and
// the libraries iproute2's rdma links (libmnl0, libbsd0, libcap2), whose
// program alone comes from guestPrograms.
var guestPackages = []string{"ibverbs-utils", "ibverbs-providers", "rdmacm-utils", "perftest", "zlib1g", // zlib1g: libpci3 needs it, and its name lacks the lib prefix the closure follows
	"libmnl0", "libbsd0", "libcap2"}

// guestPrograms are files taken alone from Debian packages, by package:
// iproute2 is ip, tc, ss and more, linking a dozen libraries (libbpf,
// libelf, libtirpc and Kerberos behind it), and the guest needs only its
// rdma, the peer of goverbs res and stat.
var guestPrograms = map[string][]string{"iproute2": {"usr/bin/rdma"}}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vm: "+format+"\n", args...)
}

func main() {
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: go run ./test/vm [flags] [test|demo|fetch|selftest|bench]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	mode := "test"
	if flag.NArg() > 0 {
		mode = flag.Arg(0)
	}
	if flag.NArg() > 1 || (mode != "test" && mode != "demo" && mode != "fetch" && mode != "selftest" && mode != "bench") {
		flag.Usage()
		os.Exit(2)
	}
	benchTimeout(mode)
	if _, err := regexp.Compile(*flagBenchPairs); err != nil {
		logf("-benchpairs: %v", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := harness(ctx, mode); err != nil {
		logf("FAIL: %v", err)
		os.Exit(1)
	}
}

// benchTimeout gives a bench-mode VM 30 minutes unless -timeout was
// given: a full 6.12 bench VM takes 10 to 13 minutes on a loaded host,
// close to the limit of 15 that suits the test runs.
func benchTimeout(mode string) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "timeout" })
	if mode == "bench" && !given {
		*flagTimeout = 30 * time.Minute
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// matrix returns the kernel series to boot for each architecture, and the
// architectures in order.
func matrix(vms string, kernels, arches []string) (map[string][]string, []string, error) {
	targets := map[string][]string{}
	var order []string
	add := func(series, arch string) error {
		if _, _, err := kernelPattern(series, arch); err != nil {
			return err
		}
		if _, _, err := qemuArgs(arch, "max", "", ""); err != nil {
			return err
		}
		if _, ok := targets[arch]; !ok {
			order = append(order, arch)
		}
		targets[arch] = append(targets[arch], series)
		return nil
	}
	if vms != "" {
		for _, v := range splitList(vms) {
			series, arch, ok := strings.Cut(v, "/")
			if !ok {
				return nil, nil, fmt.Errorf("-vms: %q is not KERNEL/ARCH", v)
			}
			if err := add(series, arch); err != nil {
				return nil, nil, err
			}
		}
		return targets, order, nil
	}
	for _, arch := range arches {
		for _, series := range kernels {
			if err := add(series, arch); err != nil {
				return nil, nil, err
			}
		}
	}
	return targets, order, nil
}

func cacheDir() (string, error) {
	if d := os.Getenv("GOVERBS_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "goverbs"), nil
}

func harness(ctx context.Context, mode string) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("the VM harness runs on Linux hosts only")
	}
	kernels := splitList(*flagKernel)
	if mode == "demo" && *flagKernel == "6.1,6.12" {
		kernels = []string{"6.1"}
	}
	targets, arches, err := matrix(*flagVMs, kernels, splitList(*flagArch))
	if err != nil {
		return err
	}
	var root string
	root, err = moduleRoot()
	if err != nil {
		return err
	}
	cache, err := cacheDir()
	if err != nil {
		return err
	}
	if err := ensureTools(ctx, arches, false); err != nil {
		return err
	}
	if *flagRace && mode == "test" {
		if err := ensureRaceTools(ctx); err != nil {
			return err
		}
	}
	a, err := newApt(cache)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "goverbs-vm-")
	if err != nil {
		return err
	}
	if *flagKeep {
		logf("work directory: %s", work)
	} else {
		defer os.RemoveAll(work)
	}

	if mode != "fetch" {
		unlock, err := lockVMs(cache)
		if err != nil {
			return err
		}
		defer unlock()
	}

	type outcome struct {
		name string
		res  *vmResult
		err  error
	}
	var outcomes []outcome
	// The host's part of the run (package downloads, the builds of /init,
	// the tool and the test binaries, each initramfs), for the summary's
	// time table beside each VM's.
	var hostTimes []string
	for _, arch := range arches {
		t0 := time.Now()
		g, err := prepareGuest(ctx, a, root, filepath.Join(work, arch), arch, mode)
		if err != nil {
			return err
		}
		if mode != "fetch" {
			hostTimes = append(hostTimes, fmt.Sprintf("%s guest: packages and %d binaries built in %s", arch, len(g.tests)+2, time.Since(t0).Round(100*time.Millisecond)))
		}
		for i, series := range targets[arch] {
			deb, err := a.resolveKernel(ctx, series, debArch(arch))
			if err != nil {
				return err
			}
			modules := neededModules
			if *flagTwoHost {
				modules = append(slices.Clone(modules), "sch_netem")
			}
			k, err := extractKernel(ctx, cache, deb, modules)
			if err != nil {
				return err
			}
			name := fmt.Sprintf("%s/%s", series, arch)
			if mode == "fetch" {
				logf("%s: %s ready (%d modules)", name, k.Release, len(k.Modules))
				continue
			}
			if mode == "selftest" {
				return selftest(ctx, g, k, filepath.Join(work, arch))
			}
			initrd := filepath.Join(work, arch, "initramfs-"+series+".cpio")
			t0 := time.Now()
			if err := g.writeInitramfs(initrd, k, i == 0); err != nil {
				return err
			}
			hostTimes = append(hostTimes, fmt.Sprintf("%s initramfs written in %s", name, time.Since(t0).Round(100*time.Millisecond)))
			cpu := qemuCPU(mode)
			if arch != "amd64" {
				cpu = "max,pauth-impdef=on" // what qemuArgs boots an arm64 guest with
			}
			logf("%s: booting Linux %s (TCG, %s, -cpu %s)", name, k.Release, arch, cpu)
			res, err := bootRetrying(ctx, arch, cpu, k.Image, initrd, *flagTimeout, os.Stdout, "["+name+"] ")
			if res != nil {
				res.Release = k.Release
			}
			if err == nil && res.Exit != 0 {
				err = fmt.Errorf("guest exit status %d", res.Exit)
			}
			outcomes = append(outcomes, outcome{name, res, err})
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	if mode == "fetch" {
		return nil
	}
	fmt.Println()
	fmt.Println("VM summary:")
	for _, l := range hostTimes {
		fmt.Printf("  host: %s\n", l)
	}
	failed, tests := 0, vmResult{}
	for _, o := range outcomes {
		if o.res != nil {
			tests.Passed += o.res.Passed
			tests.Failed += o.res.Failed
			tests.Skipped += o.res.Skipped
		}
		verdict := "PASS"
		if o.err != nil {
			verdict = "FAIL: " + o.err.Error()
			failed++
		}
		boot := "-"
		if o.res != nil && o.res.BootTime > 0 {
			boot = o.res.BootTime.Round(100 * time.Millisecond).String()
		}
		total := "-"
		if o.res != nil {
			total = o.res.Total.Round(100 * time.Millisecond).String()
		}
		rel := ""
		if o.res != nil {
			rel = o.res.Release
		}
		counts := ""
		if o.res != nil && mode == "test" {
			counts = fmt.Sprintf("%3d tests passed, %d failed, %d skipped  ", o.res.Passed, o.res.Failed, o.res.Skipped)
		}
		fmt.Printf("  %-10s %-24s boot to /init %-6s total %-7s %s%s\n", o.name, rel, boot, total, counts, verdict)
		if o.res != nil {
			if o.res.EarlyPanic != "" {
				fmt.Printf("      booted twice: the first boot's %s\n", o.res.EarlyPanic)
			}
			for _, s := range o.res.Steps {
				mark := "ok  "
				if s.RC != 0 {
					mark = fmt.Sprintf("FAIL rc=%d", s.RC)
				}
				fmt.Printf("      %-9s %-40s %s\n", mark, s.Name, s.Took)
			}
			for _, l := range failureLines(o.res.Console, 8, 40) {
				fmt.Printf("      | %s\n", l)
			}
		}
	}
	if mode == "demo" {
		for _, o := range outcomes {
			if !demoSummary(o.name, o.res, o.err) && o.err == nil {
				failed++
			}
		}
	}
	if mode == "bench" {
		var runs []benchRun
		for _, o := range outcomes {
			runs = append(runs, benchRun{o.name, o.res})
		}
		if err := benchReport(ctx, root, runs); err != nil {
			return err
		}
	}
	if mode == "test" {
		// The closing line, in the form CI counts.
		defer fmt.Printf("vm: %d passed, %d failed, %d skipped\n", tests.Passed, tests.Failed, tests.Skipped)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d VM runs failed", failed, len(outcomes))
	}
	fmt.Printf("all %d VM runs passed\n", len(outcomes))
	return nil
}

// guest is what goes into every initramfs of one architecture.
type guest struct {
	arch    string
	init    string
	tests   []testBin
	tool    string   // cmd/goverbs, for the demo
	cbench  string   // test/bench/testdata/cbench.c, built for bench mode, or ""
	mwpeer  string   // test/interop/testdata/mwpeer.c, built when test/interop runs, or ""
	pkgDirs []string // unpacked Debian packages
	// programs are the guestPrograms' files on the host, programPaths
	// where each goes in the guest.
	programs, programPaths []string
	// hostLibs are host files (the dynamic loader, libc) that go into the
	// guest at the same paths, after the packages': for -race binaries.
	hostLibs []string
	rdmahttp string // examples/rdmahttp, for the demo, or ""
	plan     plan.Plan
	noInit   bool // leave /init out (self-test)
}

func multiarchLibPath(arch string) string {
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[arch]
	return "/lib/" + triplet + ":/usr/lib/" + triplet
}

func prepareGuest(ctx context.Context, a *apt, root, dir, arch, mode string) (*guest, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	g := &guest{arch: arch, init: filepath.Join(dir, "init")}
	pkgs, err := a.closure(ctx, guestPackages, debArch(arch))
	if err != nil {
		return nil, err
	}
	debs, err := a.downloadAll(ctx, pkgs)
	if err != nil {
		return nil, err
	}
	for _, deb := range debs {
		d, err := a.unpack(ctx, deb)
		if err != nil {
			return nil, err
		}
		g.pkgDirs = append(g.pkgDirs, d)
	}
	for _, name := range slices.Sorted(maps.Keys(guestPrograms)) {
		info, err := a.show(ctx, name, debArch(arch))
		if err != nil {
			return nil, err
		}
		deb, err := a.download(ctx, info)
		if err != nil {
			return nil, err
		}
		d, err := a.unpack(ctx, deb)
		if err != nil {
			return nil, err
		}
		for _, f := range guestPrograms[name] {
			if _, err := os.Stat(filepath.Join(d, f)); err != nil {
				return nil, fmt.Errorf("%s: %w", info.debFile(), err)
			}
			g.programs = append(g.programs, filepath.Join(d, f))
			g.programPaths = append(g.programPaths, "/"+f)
		}
	}
	if mode == "fetch" {
		return g, nil
	}
	logf("%s: building /init and the guest binaries (CGO_ENABLED=0 GOARCH=%s)", arch, arch)
	if _, err := goCmd(ctx, root, arch, "build", "-o", g.init, "./test/vm/guest"); err != nil {
		return nil, err
	}
	libPath := multiarchLibPath(arch)
	p := plan.Plan{
		Netdevs:   []plan.Netdev{{Name: "d0", Kind: "dummy", Addr: "192.0.2.1/24", Addr6: "2001:db8::1/64"}},
		RDMALinks: []plan.RDMALink{{Name: "rxe0", Type: "rxe", Netdev: "d0", WaitFor: "/dev/infiniband/uverbs0"}},
		Devices:   guestDevices,
	}
	if *flagTwoHost {
		p.Netdevs = []plan.Netdev{{Name: "veth0", Kind: "veth", Peer: "veth1", Addr: "192.0.2.1/24", PeerAddr: "192.0.2.2/24"}}
		p.RDMALinks = []plan.RDMALink{{Name: "rxe0", Type: "rxe", Netdev: "veth0", WaitFor: "/dev/infiniband/uverbs0"},
			{Name: "rxe1", Type: "rxe", Netdev: "veth1", WaitFor: "/dev/infiniband/uverbs1"}}
	}
	if *flagNoRDMA {
		p.RDMALinks = nil
	}
	p.Env = splitList(*flagEnv)
	if *flagTwoHost {
		p.Env = append(p.Env, "GOVERBS_TWOHOST=1")
	}
	// The goverbs tool goes into every guest: the demo runs it, and the
	// interop tests run it beside rdma-core's tools.
	g.tool = filepath.Join(dir, "goverbs")
	if _, err := goCmd(ctx, root, arch, "build", "-o", g.tool, "./cmd/goverbs"); err != nil {
		return nil, err
	}
	switch mode {
	case "demo":
		p.Steps = []plan.Step{
			{Name: "goverbs devices", Argv: []string{"/bin/goverbs", "devices"}, TimeoutSec: 60},
			{Name: "goverbs devinfo -d rxe0", Argv: []string{"/bin/goverbs", "devinfo", "-d", "rxe0"}, TimeoutSec: 60},
			{Name: "rdma-core: ibv_devinfo -d rxe0", Argv: []string{"/usr/bin/ibv_devinfo", "-d", "rxe0"},
				LibPath: libPath, TimeoutSec: 60},
		}
		p.Steps = append(p.Steps, demoPingpong(libPath)...)
		p.Steps = append(p.Steps, demoRping(libPath)...)
		perfFlags := []string{"perf", "-d", "rxe0", "-g", "1", "-t", "send_lat", "-s", "64", "-n", "2000"}
		p.Steps = append(p.Steps,
			plan.Step{Name: "perf send_lat: goverbs server", Argv: append([]string{"/bin/goverbs"}, perfFlags...),
				Background: true, Prefix: "  perf server| ", TimeoutSec: 120},
			plan.Step{Name: "perf send_lat: goverbs client", Argv: append(append([]string{"/bin/goverbs"}, perfFlags...), "127.0.0.1"),
				DelayMs: 300, Prefix: "  perf client| ", TimeoutSec: 120})
		// Last, an HTTP request served over RDMA: examples/rdmahttp.
		g.rdmahttp = filepath.Join(dir, "rdmahttp")
		if _, err := goCmd(ctx, root, arch, "build", "-o", g.rdmahttp, "./examples/rdmahttp"); err != nil {
			return nil, err
		}
		p.Steps = append(p.Steps, demoRdmahttp()...)
	case "test", "bench":
		pkgs := splitList(*flagPkg)
		if mode == "bench" && wholeSuite() {
			pkgs = []string{"./test/bench"}
		}
		if mode == "test" && wholeSuite() && slices.Contains(splitList(*flagArchSet), arch) {
			pkgs = archPackages
			logf("%s: -archset: the packages whose code or ABI differs by architecture only (%s); make vmfull runs them all", arch, strings.Join(pkgs, " "))
		}
		race := *flagRace && mode == "test"
		if race && !raceArch(arch) {
			logf("%s: -race needs a C compiler for %s guests, and the host (%s) has none: these tests run without the race detector", arch, arch, runtime.GOARCH)
			race = false
		}
		noCheckptr = mode == "bench"
		tests, err := buildTests(ctx, root, arch, filepath.Join(dir, "tests"), pkgs, race)
		if err != nil {
			return nil, err
		}
		g.tests = tests
		if race {
			var bins []string
			for _, t := range tests {
				bins = append(bins, t.Host)
			}
			if g.hostLibs, err = hostLibs(ctx, bins); err != nil {
				return nil, err
			}
			logf("%s: race-detector test binaries; into the guest from the host: %s", arch, strings.Join(g.hostLibs, " "))
		}
		if !*flagNoRDMA && mode == "test" {
			p.Steps = []plan.Step{{Name: "smoke: ibv_devinfo -d rxe0", Argv: []string{"/usr/bin/ibv_devinfo", "-d", "rxe0"},
				LibPath: libPath, TimeoutSec: 60}}
		}
		limit := int((*flagTimeout).Seconds())
		for _, t := range tests {
			argv := []string{t.GuestPath(), "-test.timeout=" + (*flagTimeout).String()}
			if !*flagQuiet {
				argv = append(argv, "-test.v")
			}
			switch {
			case mode == "bench":
				re := *flagRun
				if re == "" {
					re = "."
				}
				argv = append(argv, "-test.run=^$", "-test.bench="+re, "-test.benchmem", "-test.benchtime="+*flagBenchT)
			case *flagRun != "":
				argv = append(argv, "-test.run="+*flagRun)
			}
			if mode == "test" && *flagCount > 1 {
				argv = append(argv, fmt.Sprintf("-test.count=%d", *flagCount))
			}
			p.Steps = append(p.Steps, plan.Step{Name: t.Pkg, Argv: argv, Dir: t.GuestDir(), TimeoutSec: limit})
		}
		if mode == "test" && slices.ContainsFunc(tests, func(t testBin) bool { return strings.HasSuffix(t.Pkg, "/test/interop") }) {
			g.mwpeer = buildC(ctx, a, root, dir, arch, g.pkgDirs, "test/interop/testdata/mwpeer.c", "C memory-window peer")
		}
		if mode == "bench" {
			g.cbench = buildCBench(ctx, a, root, dir, arch, g.pkgDirs)
			p.Steps = benchSteps(p.Steps, g.cbench != "", libPath)
		}
	}
	g.plan = p
	return g, nil
}

// demoPingpong runs goverbs' pingpong against rdma-core's ibv_rc_pingpong
// in both directions, polling and then sleeping on completion events.
func demoPingpong(libPath string) []plan.Step {
	ours := []string{"/bin/goverbs", "pingpong"}
	theirs := []string{"/usr/bin/ibv_rc_pingpong"}
	sides := demoSides{ours[0], libPath}
	var steps []plan.Step
	port := 18515
	for _, events := range []bool{false, true} {
		for _, dir := range []struct{ server, client []string }{{ours, theirs}, {theirs, ours}} {
			port++
			flags := []string{"-d", "rxe0", "-g", "1", "-n", "1000", "-p", fmt.Sprint(port)}
			mode := "polling"
			if events {
				flags = append(flags, "-e")
				mode = "events"
			}
			srv := append(append([]string{}, dir.server...), flags...)
			cli := append(append(append([]string{}, dir.client...), flags...), "127.0.0.1")
			steps = append(steps,
				plan.Step{Name: fmt.Sprintf("pingpong %s: %s server", mode, sides.name(srv)), Argv: srv, LibPath: sides.lib(srv),
					Background: true, Prefix: fmt.Sprintf("  %s %s server| ", mode, sides.name(srv)), TimeoutSec: 120},
				plan.Step{Name: fmt.Sprintf("pingpong %s: %s client", mode, sides.name(cli)), Argv: cli, LibPath: sides.lib(cli),
					DelayMs: 1000, Prefix: fmt.Sprintf("  %s %s client| ", mode, sides.name(cli)), TimeoutSec: 120})
		}
	}
	return steps
}

// skipPkgFile leaves documentation out of the guest.
func skipPkgFile(rel string) bool {
	for _, p := range []string{"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
		"usr/share/lintian", "usr/share/bug", ".unpacked"} {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// demoSummary says in a few lines what the demo showed, and whether
// goverbs and rdma-core agree.
func demoSummary(name string, res *vmResult, err error) bool {
	fmt.Println()
	fmt.Println("What the demo showed:")
	if res == nil || err != nil {
		fmt.Printf("  %s: the demo failed: %v\n", name, err)
		return false
	}
	var ours, theirs, state string
	for _, l := range res.Console {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == "rxe0" && ours == "":
			ours = f[1]
		case len(f) == 2 && f[0] == "node_guid:":
			theirs = f[1]
		case len(f) >= 2 && f[0] == "state:" && state == "":
			state = strings.Join(f[1:], " ")
		}
	}
	fmt.Printf("  - Debian's Linux %s booted under QEMU (TCG, %s) and reached /init in %v;\n",
		res.Release, res.Arch, res.BootTime.Round(100*time.Millisecond))
	fmt.Printf("    /init (static Go) loaded rdma_rxe and created soft-RoCE device rxe0 on netdev d0 over RDMA netlink.\n")
	fmt.Printf("  - goverbs (CGO_ENABLED=0, no libibverbs) found rxe0 with node GUID %s.\n", orNone(ours))
	fmt.Printf("  - rdma-core's ibv_devinfo reports node GUID %s, port 1 %s.\n", orNone(theirs), orNone(state))
	agree := ours != "" && ours == theirs
	if agree {
		fmt.Println("  - They agree.")
	} else {
		fmt.Println("  - They DISAGREE: that is a bug.")
	}
	ok := 0
	for _, st := range res.Steps {
		if strings.HasPrefix(st.Name, "pingpong") && st.RC == 0 {
			ok++
		}
	}
	fmt.Printf("  - RC ping-pong over soft-RoCE, goverbs against rdma-core's ibv_rc_pingpong, each as server and client,\n")
	fmt.Printf("    polling and event-driven: %d of 8 sides finished 1000 round trips.\n", ok)
	for _, l := range res.Console {
		if strings.Contains(l, "client| ") && strings.Contains(l, "usec/iter") {
			fmt.Println("     ", strings.Replace(strings.TrimSpace(l), "|", ":", 1))
		}
	}
	var perfRows []string
	for _, l := range res.Console {
		if i := strings.Index(l, "perf client| "); i >= 0 {
			perfRows = append(perfRows, strings.TrimSpace(l[i+len("perf client| "):]))
		}
	}
	if len(perfRows) >= 2 {
		fmt.Println("  - goverbs perf send_lat, 64-byte messages (TCG timings: compare only as ratios within one run):")
		for _, row := range perfRows[len(perfRows)-2:] {
			fmt.Println("     ", row)
		}
	}
	rpingOK := demoRpingSummary(res)
	httpOK := demoRdmahttpSummary(res)
	return agree && ok == 8 && rpingOK && httpOK
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// writeInitramfs writes the guest for kernel k; the packages that never
// touch the kernel (modelPackage) go only into the first kernel's, and
// not at all where the host runs them natively (make unit, make model),
// unless -pkg names packages.
func (g *guest) writeInitramfs(dst string, k *kernel, first bool) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	c := newCPIO(f)
	for _, d := range []string{"/dev", "/proc", "/sys", "/tmp", "/run", "/root", "/etc"} {
		c.Dir(d, 0o755)
	}
	c.CharDev("/dev/console", 0o600, 5, 1)
	if !g.noInit {
		c.HostFile("/init", g.init, 0o755)
	}
	p := g.plan
	skipped := map[string]bool{} // import paths
	for _, t := range g.tests {
		skipped[t.Pkg] = wholeSuite() && modelPackage(t.Rel) && (!first || g.arch == runtime.GOARCH)
	}
	p.Steps = slices.DeleteFunc(slices.Clone(p.Steps), func(s plan.Step) bool { return skipped[s.Name] })
	p.Modules = nil
	for _, m := range k.Modules {
		guestPath := "/lib/modules/" + filepath.Base(m)
		c.HostFile(guestPath, m, 0o644)
		p.Modules = append(p.Modules, guestPath)
	}
	for _, d := range g.pkgDirs {
		c.Tree(d, "/", skipPkgFile)
	}
	for i, f := range g.programs {
		c.HostFile(g.programPaths[i], f, 0o755)
	}
	for _, l := range g.hostLibs { // over the packages' copies: loader and libc from one build
		c.HostFile(l, l, 0o755)
	}
	if g.tool != "" {
		c.HostFile("/bin/goverbs", g.tool, 0o755)
	}
	if g.rdmahttp != "" {
		c.HostFile(demoRdmahttpGuest, g.rdmahttp, 0o755)
	}
	if g.cbench != "" {
		c.HostFile(benchGuestCBench, g.cbench, 0o755)
	}
	if g.mwpeer != "" {
		c.HostFile(mwpeerGuest, g.mwpeer, 0o755)
	}
	for _, t := range g.tests {
		if skipped[t.Pkg] {
			continue
		}
		c.HostFile(t.GuestPath(), t.Host, 0o755)
		c.Dir(t.GuestDir(), 0o755)
		if t.Data != "" {
			c.Tree(t.Data, t.GuestDir()+"/testdata", nil)
		}
	}
	raw, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	c.File(plan.Path, 0o644, raw)
	if err := c.Close(); err != nil {
		return err
	}
	return f.Close()
}
