package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/test/vm/internal/plan"
)

// vmResult is what one boot showed.
type vmResult struct {
	Exit     int // the guest's exit status, from its marker line
	BootTime time.Duration
	Total    time.Duration
	Steps    []stepResult
	Release  string
	Arch     string
	// Top-level Go tests seen on the console ("--- PASS: TestX").
	Passed, Failed, Skipped int
	Console                 []string // every console line
	// EarlyPanic is the error of a first boot whose kernel panicked
	// before /init ran, when bootRetrying booted again; "" otherwise.
	EarlyPanic string
}

type stepResult struct {
	Name string
	RC   int
	Took string
}

// qemuCPU is the -cpu value for an amd64 guest in mode: QEMU's richest
// model, less protection keys (PKU) when timing, because TCG empties its
// whole emulated TLB whenever Linux writes the protection-key register
// while it delivers a signal, a cost no real CPU has that falls on the Go
// runtime's preemption signal and on no C program.
func qemuCPU(mode string) string {
	if mode == "bench" {
		return "max,-pku"
	}
	return "max"
}

var flagQemuIcount = flag.Int("qemuicount", -1, "count instructions instead of timing: QEMU's -icount shift=N (every guest instruction advances the guest's clock by 2^N ns), so timings in the guest become instruction counts, the same in every run; -1: off (docs/PERFORMANCE.md)")

// icountArgs returns QEMU's -icount option for -qemuicount, or nothing.
// With it the guest's clock runs on the instructions executed, not the
// host's time: a benchmark's ns/op is then its instructions × 2^shift,
// whatever the host's load. align=off lets the guest's clock run ahead
// of the host's; sleep=off jumps it over idle periods at once.
func icountArgs(shift int) []string {
	if shift < 0 {
		return nil
	}
	return []string{"-icount", "shift=" + strconv.Itoa(shift) + ",align=off,sleep=off"}
}

// qemuArgs returns the command line for one boot, cpu being an amd64
// guest's -cpu value (qemuCPU). KVM is not used (it is not usable on our
// machines): TCG always.
func qemuArgs(arch, cpu, kernel, initrd string) (string, []string, error) {
	smp := strconv.Itoa(min(2, runtime.NumCPU())) // never more vCPUs than host cores
	if *flagQemuIcount >= 0 {
		// One vCPU: QEMU runs counted vCPUs in turn on one host thread, on
		// which a guest with two makes no progress in its boot.
		smp = "1"
	}
	common := append([]string{"-accel", "tcg", "-smp", smp, "-m", "1024",
		"-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio",
		"-kernel", kernel, "-initrd", initrd}, icountArgs(*flagQemuIcount)...)
	switch arch {
	case "amd64":
		return "qemu-system-x86_64", append([]string{"-cpu", cpu}, append(common,
			"-append", "console=ttyS0 panic=-1 tsc=reliable quiet")...), nil
	case "arm64":
		// pauth-impdef: an implementation-defined pointer-auth hash, much
		// cheaper to emulate than the architected QARMA.
		return "qemu-system-aarch64", append([]string{"-M", "virt", "-cpu", "max,pauth-impdef=on"}, append(common,
			"-append", "console=ttyAMA0 panic=-1 quiet")...), nil
	}
	return "", nil, fmt.Errorf("unsupported guest architecture %q (have amd64, arm64)", arch)
}

// boot runs one VM to its end, copying the console to log with prefix on
// each line, within limit.
func boot(ctx context.Context, arch, cpu, kernel, initrd string, limit time.Duration, log io.Writer, prefix string) (*vmResult, error) {
	bin, args, err := qemuArgs(arch, cpu, kernel, initrd)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	res := &vmResult{Exit: -1, Arch: arch}
	var sawInit bool
	var panicLine, last string
	cuts := 0
	rerr := consoleLines(stdout, maxConsoleLine, func(line string, dropped int) {
		line = strings.TrimRight(line, "\r")
		if dropped > 0 {
			cuts++
			line += fmt.Sprintf(" [harness: line cut here, %d more bytes dropped]", dropped)
		}
		if !strings.HasPrefix(line, plan.MarkFile) { // files out of the guest: kept, not shown
			fmt.Fprintf(log, "%s%s\n", prefix, line)
		}
		res.Console = append(res.Console, line)
		if strings.TrimSpace(line) != "" {
			last = line
		}
		switch {
		case strings.HasPrefix(line, plan.MarkInit):
			sawInit = true
			res.BootTime = time.Since(start)
		case strings.HasPrefix(line, plan.MarkStep):
			res.Steps = append(res.Steps, parseStep(strings.TrimPrefix(line, plan.MarkStep)))
		case strings.HasPrefix(line, plan.MarkExit):
			if n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, plan.MarkExit))); err == nil {
				res.Exit = n
			}
		case strings.HasPrefix(line, "--- PASS: "):
			res.Passed++
		case strings.HasPrefix(line, "--- FAIL: "):
			res.Failed++
		case strings.HasPrefix(line, "--- SKIP: "):
			res.Skipped++
		case strings.Contains(line, "Kernel panic"):
			if panicLine == "" {
				panicLine = strings.TrimSpace(line)
			}
		}
	})
	if cuts > 0 {
		fmt.Fprintf(log, "%sharness: %d console lines longer than %d bytes were cut\n", prefix, cuts, maxConsoleLine)
	}
	werr := cmd.Wait()
	if rerr != nil && werr == nil {
		werr = fmt.Errorf("reading the console: %w", rerr)
	}
	res.Total = time.Since(start)
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return res, fmt.Errorf("the VM ran past its %v time limit and was killed (last console line: %q)", limit, last)
	case ctx.Err() != nil:
		return res, ctx.Err()
	case res.Exit >= 0:
		return res, nil
	case panicLine != "" && !sawInit:
		return res, fmt.Errorf("%w: %s", errPanicBeforeInit, panicLine)
	case panicLine != "":
		return res, fmt.Errorf("kernel panic: %s", panicLine)
	case !sawInit:
		msg := "the guest never reached /init (the kernel did not boot, or could not run the initramfs's /init)"
		if werr != nil {
			msg += fmt.Sprintf("; %s: %v: %s", bin, werr, strings.TrimSpace(stderr.String()))
		}
		return res, errors.New(msg)
	default:
		return res, fmt.Errorf("the guest stopped without an exit status (last console line: %q)", last)
	}
}

// maxConsoleLine is the most of one console line the harness keeps; the
// rest of a longer line is read and dropped, and the line says so, so no
// output of a test can stop the harness reading the guest.
const maxConsoleLine = 64 << 10

// consoleLines reads r to its end and calls fn with each line, without
// its newline: the first limit bytes of it, and how many more it dropped.
func consoleLines(r io.Reader, limit int, fn func(line string, dropped int)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	dropped := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if err == nil {
			chunk = chunk[:len(chunk)-1] // the newline
		}
		keep := min(len(chunk), limit-min(limit, len(line)))
		line = append(line, chunk[:keep]...)
		dropped += len(chunk) - keep
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil || len(line)+dropped > 0 {
			fn(string(line), dropped)
			line, dropped = line[:0], 0
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// errPanicBeforeInit is boot's error when the guest's kernel panicked
// before it ran /init.
var errPanicBeforeInit = errors.New("kernel panic before /init ran")

// bootRetrying boots as boot does, and once more if the kernel panics
// before /init ran. Nothing of ours runs that early, so with an initramfs
// that has an /init such a panic is the emulator's or Debian's kernel's,
// not a finding: QEMU 7.2's TCG with two vCPUs now and then runs a stale
// int3 of the kernel's live code patching, and 6.12/amd64 dies two seconds
// into its boot ("Oops: int3" in sched_clock_cpu). A second boot that
// panics the same way fails as boot does. The retried result says what
// the first boot met, so the summary shows it.
func bootRetrying(ctx context.Context, arch, cpu, kernel, initrd string, limit time.Duration, log io.Writer, prefix string) (*vmResult, error) {
	return retryEarlyPanic(ctx, log, prefix, func() (*vmResult, error) {
		return boot(ctx, arch, cpu, kernel, initrd, limit, log, prefix)
	})
}

// retryEarlyPanic calls run, and once more if its error is
// errPanicBeforeInit.
func retryEarlyPanic(ctx context.Context, log io.Writer, prefix string, run func() (*vmResult, error)) (*vmResult, error) {
	res, err := run()
	if !errors.Is(err, errPanicBeforeInit) || ctx.Err() != nil {
		return res, err
	}
	fmt.Fprintf(log, "%sthe guest's kernel panicked before /init ran, so none of our code had run (%v): booting it once more\n", prefix, err)
	res, err2 := run()
	if res != nil {
		res.EarlyPanic = err.Error()
	}
	return res, err2
}

// parseStep reads "<name> rc=<n> took=<d>"; the name may hold spaces.
func parseStep(s string) stepResult {
	var r stepResult
	f := strings.Fields(s)
	if len(f) < 3 {
		return stepResult{Name: s, RC: -1}
	}
	r.Name = strings.Join(f[:len(f)-2], " ")
	r.RC, _ = strconv.Atoi(strings.TrimPrefix(f[len(f)-2], "rc="))
	r.Took = strings.TrimPrefix(f[len(f)-1], "took=")
	return r
}

// failureLines picks out of a console what the summary shows of its
// failures, so that the last screen of a long run (all that a CI log may
// keep) says which tests failed and why: each "--- FAIL" line, after the
// lines its test printed since the test's last "=== " line (the last
// perTest of them), and each panic's or fatal error's first lines; at
// most limit lines in all, the last of them saying how many were left out.
func failureLines(console []string, perTest, limit int) []string {
	var out, since []string
	for i, l := range console {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "=== "), strings.HasPrefix(t, "--- PASS"), strings.HasPrefix(t, "--- SKIP"):
			since = since[:0]
		case strings.HasPrefix(t, "--- FAIL"):
			out = append(out, since[max(0, len(since)-perTest):]...)
			out = append(out, l)
			since = since[:0]
		case strings.HasPrefix(l, "panic: "), strings.HasPrefix(l, "fatal error: "):
			out = append(out, console[i:min(len(console), i+perTest)]...)
			since = since[:0]
		case strings.HasPrefix(l, plan.MarkFile):
		default:
			since = append(since, l)
		}
	}
	if len(out) > limit {
		left := len(out) - (limit - 1)
		out = append(out[:limit-1:limit-1], fmt.Sprintf("(%d more lines: the console above has them all)", left))
	}
	return out
}
