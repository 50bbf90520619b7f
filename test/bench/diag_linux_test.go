package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// GOVERBS_BENCH_DIAG=1 (make bench VMFLAGS=-env=GOVERBS_BENCH_DIAG=1)
// makes the drain benchmarks and the event round trip log, over each one, how every thread of the
// process moved (run time, switches, moves between CPUs) and which
// interrupts the guest took: what may stand between a drain and its ring
// pages. It showed the benchmark's goroutine taking turns on two threads,
// one per vCPU (docs/PERFORMANCE-LOG.md).
var benchDiag = os.Getenv("GOVERBS_BENCH_DIAG") != ""

// tstat is one thread's counters: run time (ns), voluntary and
// involuntary context switches, moves between CPUs.
type tstat struct{ run, vol, invol, mig int64 }

// readThreads reads every thread's counters (/proc/self/task).
func readThreads() map[int]tstat {
	m := map[int]tstat{}
	dirs, _ := filepath.Glob("/proc/self/task/*")
	for _, d := range dirs {
		tid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		var t tstat
		if b, err := os.ReadFile(d + "/schedstat"); err == nil {
			fmt.Sscan(string(b), &t.run)
		}
		if b, err := os.ReadFile(d + "/status"); err == nil {
			s := bufio.NewScanner(bytes.NewReader(b))
			for s.Scan() {
				fmt.Sscanf(s.Text(), "voluntary_ctxt_switches: %d", &t.vol)
				fmt.Sscanf(s.Text(), "nonvoluntary_ctxt_switches: %d", &t.invol)
			}
		}
		if b, err := os.ReadFile(d + "/sched"); err == nil {
			s := bufio.NewScanner(bytes.NewReader(b))
			for s.Scan() {
				if f := strings.Fields(s.Text()); len(f) == 3 && f[0] == "se.nr_migrations" {
					t.mig, _ = strconv.ParseInt(f[2], 10, 64)
				}
			}
		}
		m[tid] = t
	}
	return m
}

// readIRQs sums /proc/interrupts per row over the CPUs.
func readIRQs() map[string]int64 {
	m := map[string]int64{}
	b, _ := os.ReadFile("/proc/interrupts")
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Scan()
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 2 {
			continue
		}
		name := strings.TrimSuffix(f[0], ":")
		var sum int64
		for _, x := range f[1:] {
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				break
			}
			sum += n
		}
		m[name] = sum
	}
	return m
}

// diag is the counters when a benchmark started.
type diag struct {
	th  map[int]tstat
	irq map[string]int64
}

// startDiag reads the counters, or returns nil without GOVERBS_BENCH_DIAG.
func startDiag() *diag {
	if !benchDiag {
		return nil
	}
	return &diag{readThreads(), readIRQs()}
}

// report logs how the counters moved since startDiag: the threads that
// ran a millisecond or more or switched, and the interrupts by kind.
func (d *diag) report(b *testing.B) {
	if d == nil {
		return
	}
	th, irq := readThreads(), readIRQs()
	for tid, a := range th {
		p := d.th[tid]
		if a.run-p.run < 1e6 && a.vol == p.vol && a.invol == p.invol {
			continue
		}
		b.Logf("thread %d: ran %.1f ms, %d voluntary, %d involuntary, %d migrations", tid, float64(a.run-p.run)/1e6, a.vol-p.vol, a.invol-p.invol, a.mig-p.mig)
	}
	var parts []string
	for k, v := range irq {
		if dv := v - d.irq[k]; dv > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, dv))
		}
	}
	sort.Strings(parts)
	b.Logf("interrupts (all CPUs): %s", strings.Join(parts, ", "))
}
