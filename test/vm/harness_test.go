package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type cpioEntry struct {
	Name  string
	Mode  uint32
	Major uint32
	Minor uint32
	Data  string
}

// readNewc parses a newc archive, checking magic and alignment as the
// kernel's unpacker does.
func readNewc(t *testing.T, b []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	for {
		if off%4 != 0 {
			t.Fatalf("entry at %d is not 4-byte aligned", off)
		}
		if string(b[off:off+6]) != "070701" {
			t.Fatalf("bad magic %q at %d", b[off:off+6], off)
		}
		e := cpioEntry{Mode: fieldAt(t, b, off, 1), Major: fieldAt(t, b, off, 9), Minor: fieldAt(t, b, off, 10)}
		size, nl := int(fieldAt(t, b, off, 6)), int(fieldAt(t, b, off, 11))
		e.Name = string(b[off+110 : off+110+nl-1])
		if b[off+110+nl-1] != 0 {
			t.Fatalf("name %q is not NUL-terminated", e.Name)
		}
		off = align(off + 110 + nl)
		e.Data = string(b[off : off+size])
		off = align(off + size)
		if e.Name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, e)
	}
}

// fieldAt reads the i'th 8-hex-digit field after the magic.
func fieldAt(t *testing.T, b []byte, off, i int) uint32 {
	t.Helper()
	v, err := strconv.ParseUint(string(b[off+6+8*i:off+14+8*i]), 16, 32)
	if err != nil {
		t.Fatalf("at %d: field %d: %v", off, i, err)
	}
	return uint32(v)
}

func align(n int) int { return (n + 3) &^ 3 }

func TestCPIO(t *testing.T) {
	var buf bytes.Buffer
	c := newCPIO(&buf)
	c.Dir("/dev", 0o755)
	c.CharDev("/dev/console", 0o600, 5, 1)
	c.File("/goverbs/plan.json", 0o644, []byte("{}"))
	c.Symlink("/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
	c.File("/a/b/c", 0o755, []byte("12345"))
	c.Dir("/a/b", 0o755) // already there: not added twice
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	got := readNewc(t, buf.Bytes())
	want := []cpioEntry{
		{Name: "dev", Mode: sIFDIR | 0o755},
		{Name: "dev/console", Mode: sIFCHR | 0o600, Major: 5, Minor: 1},
		{Name: "goverbs", Mode: sIFDIR | 0o755},
		{Name: "goverbs/plan.json", Mode: sIFREG | 0o644, Data: "{}"},
		{Name: "lib64", Mode: sIFDIR | 0o755},
		{Name: "lib64/ld-linux-x86-64.so.2", Mode: sIFLNK | 0o777, Data: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		{Name: "a", Mode: sIFDIR | 0o755},
		{Name: "a/b", Mode: sIFDIR | 0o755},
		{Name: "a/b/c", Mode: sIFREG | 0o755, Data: "12345"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("archive (-want +got):\n%s", diff)
	}
}

func TestLoadOrder(t *testing.T) {
	dep := `
rdma_rxe.ko: ib_uverbs.ko ip6_udp_tunnel.ko udp_tunnel.ko ib_core.ko
ib_uverbs.ko: ib_core.ko
ib_core.ko:
udp_tunnel.ko:
ip6_udp_tunnel.ko:
dummy.ko:
ib_cm.ko: ib_core.ko
iw_cm.ko: ib_core.ko
configfs.ko:
rdma_cm.ko: ib_cm.ko ib_core.ko iw_cm.ko configfs.ko
rdma_ucm.ko: rdma_cm.ko ib_core.ko ib_uverbs.ko
`
	deps, err := parseModulesDep(strings.NewReader(dep))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		want []string
		got  []string
	}{
		{[]string{"rdma_rxe"}, []string{"ib_core", "ib_uverbs", "ip6_udp_tunnel", "udp_tunnel", "rdma_rxe"}},
		{[]string{"crc32-generic", "dummy", "rdma_rxe", "ib_core"}, // crc32_generic: built in
			[]string{"dummy", "ib_core", "ib_uverbs", "ip6_udp_tunnel", "udp_tunnel", "rdma_rxe"}},
		// The connection manager, as Debian's 6.1 and 6.12 declare it.
		{[]string{"rdma_ucm"}, []string{"ib_core", "ib_cm", "iw_cm", "configfs", "rdma_cm", "ib_uverbs", "rdma_ucm"}},
	}
	for _, tt := range tests {
		got, err := loadOrder(deps, tt.want)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.got, got); diff != "" {
			t.Errorf("loadOrder(%v) (-want +got):\n%s", tt.want, diff)
		}
	}
	// A kernel with configfs built in lists it in modules.builtin, not in
	// modules.dep: the module is left out of the load order, not missed.
	noConfigfs := maps.Clone(deps)
	delete(noConfigfs, "configfs")
	got, err := loadOrder(noConfigfs, []string{"configfs", "ib_cm", "iw_cm", "rdma_cm", "rdma_ucm"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ib_core", "ib_cm", "iw_cm", "rdma_cm", "ib_uverbs", "rdma_ucm"}, got); diff != "" {
		t.Errorf("loadOrder with configfs built in (-want +got):\n%s", diff)
	}
	deps["ib_core"] = []string{"rdma_rxe"}
	if _, err := loadOrder(deps, []string{"rdma_rxe"}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("a dependency cycle gave err = %v", err)
	}
	if _, err := parseModulesDep(strings.NewReader("no colon here\n")); err == nil {
		t.Error("a line without a colon was accepted")
	}
}

func TestModName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/net/ipv4/udp_tunnel.ko.xz": "udp_tunnel",
		"kernel/crypto/crc32_generic.ko":   "crc32_generic",
		"crc32-generic":                    "crc32_generic",
		"rdma_rxe.ko.zst":                  "rdma_rxe",
	} {
		if got := modName(in); got != want {
			t.Errorf("modName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKernelPattern(t *testing.T) {
	tests := []struct {
		series, arch, name string
		build              int
	}{
		{"6.1", "amd64", "linux-image-6.1.0-56-amd64", 56},
		{"6.1", "amd64", "linux-image-6.1.0-56-cloud-amd64", -1},
		{"6.1", "amd64", "linux-image-6.1.0-56-amd64-unsigned", -1},
		{"6.1", "arm64", "linux-image-6.1.0-9-arm64_6.1.27-1_arm64.deb", 9},
		{"6.12", "amd64", "linux-image-6.12.117+deb12-amd64", 117},
		{"6.12", "amd64", "linux-image-6.12.117+deb12-rt-amd64", -1},
		{"6.12", "amd64", "linux-image-6.1.0-56-amd64", -1},
	}
	for _, tt := range tests {
		re, _, err := kernelPattern(tt.series, tt.arch)
		if err != nil {
			t.Fatal(err)
		}
		if got := buildNumber(re, tt.name); got != tt.build {
			t.Errorf("%s/%s: buildNumber(%q) = %d, want %d", tt.series, tt.arch, tt.name, got, tt.build)
		}
	}
	if _, _, err := kernelPattern("5.10", "amd64"); err == nil {
		t.Error("kernel series 5.10 was accepted")
	}
}

func TestParseStep(t *testing.T) {
	got := parseStep("smoke: ibv_devinfo -d rxe0 rc=3 took=79ms")
	want := stepResult{Name: "smoke: ibv_devinfo -d rxe0", RC: 3, Took: "79ms"}
	if got != want {
		t.Errorf("parseStep = %+v, want %+v", got, want)
	}
}

func TestMatrix(t *testing.T) {
	targets, order, err := matrix("6.1/amd64,6.12/amd64,6.1/arm64", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"amd64": {"6.1", "6.12"}, "arm64": {"6.1"}}, targets); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"amd64", "arm64"}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"6.1", "6.1/sparc", "4.19/amd64"} {
		if _, _, err := matrix(bad, nil, nil); err == nil {
			t.Errorf("matrix(%q) was accepted", bad)
		}
	}
	targets, _, err = matrix("", []string{"6.1", "6.12"}, []string{"arm64"})
	if err != nil || fmt.Sprint(targets) != "map[arm64:[6.1 6.12]]" {
		t.Errorf("matrix from -kernel/-arch = %v, %v", targets, err)
	}
}

// TestQemuCPU: the timed runs take protection keys out of the emulated
// CPU (qemuCPU says why); every other run boots QEMU's richest model.
func TestQemuCPU(t *testing.T) {
	for mode, want := range map[string]string{"test": "max", "demo": "max", "selftest": "max", "bench": "max,-pku"} {
		if got := qemuCPU(mode); got != want {
			t.Errorf("mode %s: -cpu %q, want %q", mode, got, want)
		}
	}
	_, args, err := qemuArgs("amd64", "max,-pku", "k", "i")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(args[:2], " "); got != "-cpu max,-pku" {
		t.Errorf("qemuArgs: starts %q, want -cpu max,-pku", got)
	}
}

// TestQemuIcount: -qemuicount=N boots one vCPU whose clock counts
// instructions (docs/PERFORMANCE.md); -1, the
// default, leaves QEMU timing as it does.
func TestQemuIcount(t *testing.T) {
	defer func(v int) { *flagQemuIcount = v }(*flagQemuIcount)
	for _, c := range []struct {
		shift      int
		smp, count string
	}{
		{-1, strconv.Itoa(min(2, runtime.NumCPU())), ""},
		{0, "1", "shift=0,align=off,sleep=off"},
		{3, "1", "shift=3,align=off,sleep=off"},
	} {
		*flagQemuIcount = c.shift
		_, args, err := qemuArgs("amd64", "max,-pku", "k", "i")
		if err != nil {
			t.Fatal(err)
		}
		opt := func(name string) string {
			if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
				return args[i+1]
			}
			return ""
		}
		if got := opt("-smp"); got != c.smp {
			t.Errorf("-qemuicount=%d: -smp %q, want %q", c.shift, got, c.smp)
		}
		if got := opt("-icount"); got != c.count {
			t.Errorf("-qemuicount=%d: -icount %q, want %q", c.shift, got, c.count)
		}
	}
}

// TestBenchTimeout: bench mode gives a VM 30 minutes unless -timeout says
// otherwise; the other modes keep the flag's value.
func TestBenchTimeout(t *testing.T) {
	defer func(v time.Duration) { *flagTimeout = v }(*flagTimeout)
	*flagTimeout = 15 * time.Minute
	benchTimeout("test")
	if *flagTimeout != 15*time.Minute {
		t.Errorf("test mode: %v, want 15m", *flagTimeout)
	}
	benchTimeout("bench")
	if *flagTimeout != 30*time.Minute {
		t.Errorf("bench mode, no -timeout: %v, want 30m", *flagTimeout)
	}
	if err := flag.Set("timeout", "20m"); err != nil {
		t.Fatal(err)
	}
	benchTimeout("bench")
	if *flagTimeout != 20*time.Minute {
		t.Errorf("bench mode, -timeout=20m: %v, want 20m", *flagTimeout)
	}
}

func TestFailureLines(t *testing.T) {
	console := []string{
		"GOVERBS-VM: step pkg/a rc=0 took=1s",
		"=== RUN   TestGood",
		"    a_test.go:10: fine",
		"--- PASS: TestGood (0.00s)",
		"=== RUN   TestBad",
		"=== RUN   TestBad/sub",
		"    a_test.go:20: one",
		"    a_test.go:21: two",
		"    --- FAIL: TestBad/sub (0.00s)",
		"--- FAIL: TestBad (0.00s)",
		"=== RUN   TestPanics",
		"panic: boom",
		"",
		"goroutine 1 [running]:",
	}
	want := []string{
		"    a_test.go:20: one",
		"    a_test.go:21: two",
		"    --- FAIL: TestBad/sub (0.00s)",
		"--- FAIL: TestBad (0.00s)",
		"panic: boom",
		"",
		"goroutine 1 [running]:",
	}
	if diff := cmp.Diff(want, failureLines(console, 8, 40)); diff != "" {
		t.Errorf("failureLines (-want +got):\n%s", diff)
	}
	got := failureLines(console, 1, 3)
	want = []string{"    a_test.go:21: two", "    --- FAIL: TestBad/sub (0.00s)", "(2 more lines: the console above has them all)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("failureLines capped (-want +got):\n%s", diff)
	}
	if got := failureLines(console[:4], 8, 40); len(got) != 0 {
		t.Errorf("failureLines of a passing console = %q, want none", got)
	}
}

func TestRetryEarlyPanic(t *testing.T) {
	early := fmt.Errorf("%w: Kernel panic - not syncing: Fatal exception in interrupt", errPanicBeforeInit)
	later := errors.New("kernel panic: Attempted to kill init!")
	for _, c := range []struct {
		name      string
		errs      []error // what each boot returns
		wantBoots int
		wantErr   error
		wantEarly bool
	}{
		{"passes", []error{nil}, 1, nil, false},
		{"fails after /init", []error{later}, 1, later, false},
		{"early panic, then passes", []error{early, nil}, 2, nil, true},
		{"early panic twice", []error{early, early}, 2, early, true},
		{"early panic, then fails", []error{early, later}, 2, later, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			boots := 0
			var log strings.Builder
			res, err := retryEarlyPanic(context.Background(), &log, "[x] ", func() (*vmResult, error) {
				boots++
				return &vmResult{Exit: -1}, c.errs[boots-1]
			})
			if boots != c.wantBoots {
				t.Errorf("booted %d times, want %d", boots, c.wantBoots)
			}
			if err != c.wantErr {
				t.Errorf("error %v, want %v", err, c.wantErr)
			}
			if got := res.EarlyPanic != ""; got != c.wantEarly {
				t.Errorf("EarlyPanic %q, want it set: %v", res.EarlyPanic, c.wantEarly)
			}
			if c.wantEarly && !strings.Contains(log.String(), "[x] the guest's kernel panicked before /init ran") {
				t.Errorf("log %q does not say why it booted again", log.String())
			}
		})
	}
}

// A console line of any length is read to its end: cut to the limit, with
// the count of what was dropped, and the lines after it still come.
func TestConsoleLines(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	in := "first\n" + long + "\nGOVERBS-VM: exit status 0\nno newline"
	type line struct {
		Text    string
		Dropped int
	}
	var got []line
	if err := consoleLines(strings.NewReader(in), 100, func(l string, d int) { got = append(got, line{l, d}) }); err != nil {
		t.Fatal(err)
	}
	want := []line{{"first", 0}, {long[:100], 1<<20 - 100}, {"GOVERBS-VM: exit status 0", 0}, {"no newline", 0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// TestBatchByBase: go test -c -o dir/ names each binary by its package's
// last element, so one batch must not hold two packages that share it.
func TestBatchByBase(t *testing.T) {
	var bins []testBin
	for _, p := range []string{"m/uverbs", "m/provider", "m/internal/provider", "m/cq", "m/x/provider", "m/internal/cq"} {
		bins = append(bins, testBin{Pkg: p})
	}
	var got [][]string
	for _, batch := range batchByBase(bins) {
		var pkgs []string
		for _, b := range batch {
			pkgs = append(pkgs, b.Pkg)
		}
		got = append(got, pkgs)
	}
	want := [][]string{{"m/uverbs", "m/provider", "m/cq"}, {"m/internal/provider", "m/internal/cq"}, {"m/x/provider"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("batchByBase (-want +got):\n%s", diff)
	}
}
