package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// threadStat is what the kernel counts for one thread of this process:
// scheduler run and wait time (/proc/…/schedstat, ns) and context
// switches (/proc/…/status).
type threadStat struct {
	run, wait, slices int64
	utime, stime      int64 // user and system time, in clock ticks (/proc/…/stat)
	vol, invol        int64
	migrations        int64  // moves between CPUs (/proc/…/sched, se.nr_migrations)
	cpu               int    // the CPU it last ran on (/proc/…/stat, field 39)
	wchan             string // where it sleeps in the kernel: tells sysmon (nanosleep) from a parked M (futex) or the netpoller (epoll)
}

// threadStats reads every thread's counters. goverbs perf prints how they
// moved over the measured loop when GOVERBS_PERF_THREADS is set: which
// threads ran beside the polling one, and how often the poller was
// preempted.
func threadStats() map[int]threadStat {
	tids := threadIDs()
	m := make(map[int]threadStat, len(tids))
	for _, tid := range tids {
		d := "/proc/self/task/" + strconv.Itoa(tid)
		var t threadStat
		if b, err := os.ReadFile(d + "/schedstat"); err == nil {
			fmt.Sscan(string(b), &t.run, &t.wait, &t.slices)
		}
		if b, err := os.ReadFile(d + "/status"); err == nil {
			s := bufio.NewScanner(bytes.NewReader(b))
			for s.Scan() {
				fmt.Sscanf(s.Text(), "voluntary_ctxt_switches: %d", &t.vol)
				fmt.Sscanf(s.Text(), "nonvoluntary_ctxt_switches: %d", &t.invol)
			}
		}
		if b, err := os.ReadFile(d + "/stat"); err == nil {
			// After the command name, in parentheses: fields 3 on; utime
			// and stime are fields 14 and 15.
			if i := bytes.LastIndexByte(b, ')'); i > 0 {
				if f := strings.Fields(string(b[i+1:])); len(f) > 36 {
					t.utime, _ = strconv.ParseInt(f[11], 10, 64)
					t.stime, _ = strconv.ParseInt(f[12], 10, 64)
					t.cpu, _ = strconv.Atoi(f[36])
				}
			}
		}
		if b, err := os.ReadFile(d + "/sched"); err == nil {
			s := bufio.NewScanner(bytes.NewReader(b))
			for s.Scan() {
				if f := strings.Fields(s.Text()); len(f) == 3 && f[0] == "se.nr_migrations" {
					t.migrations, _ = strconv.ParseInt(f[2], 10, 64)
				}
			}
		}
		if b, err := os.ReadFile(d + "/wchan"); err == nil {
			t.wchan = string(b)
		}
		m[tid] = t
	}
	return m
}

// threadIDs lists the IDs of this process's threads (/proc/self/task).
func threadIDs() []int {
	dirs, _ := filepath.Glob("/proc/self/task/*")
	tids := make([]int, 0, len(dirs))
	for _, d := range dirs {
		if tid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}

// printThreadDiff prints, per thread, what changed between two readings.
func printThreadDiff(w io.Writer, before, after map[int]threadStat) {
	tids := make([]int, 0, len(after))
	for tid := range after {
		tids = append(tids, tid)
	}
	sort.Ints(tids)
	for _, tid := range tids {
		a, b := after[tid], before[tid]
		fmt.Fprintf(w, "thread %d: ran %.3f ms (user %d, system %d ticks), waited %.3f ms runnable, %d slices, %d voluntary and %d involuntary switches, %d migrations, on CPU %d, sleeps in %q\n",
			tid, float64(a.run-b.run)/1e6, a.utime-b.utime, a.stime-b.stime, float64(a.wait-b.wait)/1e6, a.slices-b.slices, a.vol-b.vol, a.invol-b.invol, a.migrations-b.migrations, a.cpu, a.wchan)
	}
}

// onePoller gives the Go scheduler one P, as perftest and ibv_rc_pingpong
// run on one thread, unless GOMAXPROCS is set in the environment.
//
// The tools poll in one goroutine that never blocks. Every 10 ms the
// runtime preempts it (sysmon), and a preempted goroutine is queued while
// an idle P's thread is woken to look for work: that thread, on a machine
// with no core to spare (the benchmark VM: two vCPUs, client and server
// each polling on one), takes a core from a poller for a scheduler slice,
// or takes the goroutine itself to another thread. Measured with
// GOVERBS_PERF_THREADS on 6.1: with GOMAXPROCS=2 both sides' pollers
// spent 10-24 ms of a ~55 ms send_lat loop runnable but not running, on
// two busy threads per process; p99 was 2.5-3x rdma-core's.
func onePoller() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// monitorThread returns the thread ID of the Go runtime's monitor (sysmon),
// or 0. sysmon is the first thread the runtime creates (runtime.main starts
// it before any package is initialised), so its ID is the lowest one above
// the process ID, or, if IDs wrapped around before it was made, the lowest
// of all.
func monitorThread() int {
	pid := os.Getpid()
	above, below := 0, 0
	for _, tid := range threadIDs() {
		switch {
		case tid == pid:
		case tid > pid && (above == 0 || tid < above):
			above = tid
		case tid < pid && (below == 0 || tid < below):
			below = tid
		}
	}
	if above != 0 {
		return above
	}
	return below
}

// sysmonFlag is the default of the tools' -sysmon flag: GOVERBS_SYSMON
// from the environment if set (so a harness can switch it for every run),
// else "idle".
func sysmonFlag() string {
	if v := os.Getenv("GOVERBS_SYSMON"); v != "" {
		return v
	}
	return "idle"
}

// validSysmon reports whether v is a value -sysmon takes.
func validSysmon(v string) bool { return v == "idle" || v == "nice" || v == "normal" }

// quietMonitor lowers the priority of the Go runtime's monitor thread
// (sysmon): mode "idle" moves it to the SCHED_IDLE policy, "nice" gives it
// nice 19, "normal" leaves it alone.
//
// sysmon wakes every 10 ms while goroutines run, and more often after the
// process blocked. On a machine with no core to spare (the benchmark VM:
// two vCPUs, client and server each busy-polling on one) every wakeup takes
// a CPU from a poller: the kernel switches to the newly woken thread at
// once, and with the softirq work that lands on it, it held the vCPU
// about 230 µs a time under TCG, 6 to 90 times over a tool's timed loop.
// A woken SCHED_IDLE thread does not preempt a normal one; it runs when a
// CPU has nothing else to do, or for a sliver of a scheduler period. At
// nice 19 its weight makes a wakeup preemption all but impossible too, but
// it keeps a larger share. perftest, one C thread, has nothing like it
// to move. Measured on 6.1 (docs/PERFORMANCE-LOG.md), p99 against perftest's:
// 2.2x with sysmon left alone, 1.25x idle (with a single stall of 2-13 ms
// in a fifth of the runs), 1.5x nice (no such stall).
//
// What a late sysmon delays is harmless to a busy-polling tool on one P:
// preempting the one goroutine (nothing else wants the P), taking the P
// from a goroutine blocked in a system call (the CPU that call leaves
// idle lets sysmon run), a forced garbage collection (every two minutes at most;
// the timed loop allocates nothing).
func quietMonitor(mode string) {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr}
	switch mode {
	case "idle":
		attr.Policy = unix.SCHED_IDLE
	case "nice":
		attr.Policy, attr.Nice = unix.SCHED_NORMAL, 19
	default:
		return
	}
	tid := monitorThread()
	if tid == 0 {
		fmt.Fprintln(os.Stderr, "goverbs: the Go runtime's monitor thread was not found; it keeps its priority")
		return
	}
	if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
		fmt.Fprintf(os.Stderr, "goverbs: the Go runtime's monitor thread keeps its priority: sched_setattr: %v\n", err)
	}
}

// holdFlag is the default of the tools' -hold flag: false if
// GOVERBS_HOLD is "0" (so a harness can switch it for every run), else
// true.
func holdFlag() bool { return os.Getenv("GOVERBS_HOLD") != "0" }

// holdPoller is the tools' -hold: holdThreads, saying on stderr if the
// threads could not be held (the run goes on without).
func holdPoller() {
	if _, err := holdThreads(); err != nil {
		fmt.Fprintln(os.Stderr, "goverbs: the runtime's threads are not held to the poller's CPU:", err)
	}
}

// holdThreads locks the calling goroutine, the poller, to its thread and
// holds every thread of the process to the CPU that thread runs on now
// (threads made later inherit it). It returns that CPU, or -1 and why not.
//
// Why: on a machine with no core to spare (the benchmark VM: two vCPUs,
// client and server each busy-polling one), a runtime thread (the
// monitor, an idle thread) that wakes on the peer's CPU takes it from the
// peer and switches that CPU's address space there and back, which QEMU's
// TCG pays for twice over: it empties the vCPU's emulated TLB and jump
// cache on each switch, and the kernel's work after it runs slower
// (docs/PERFORMANCE-LOG.md, the twenty-second round: about 100 such wakeups a
// second made rdma-core's own PostPoll 14 % slower). Held to the
// poller's CPU, the runtime's threads only take turns with their own
// poller, in the same address space. The poller is held too: had it
// moved to the peer's CPU later, it would have left its threads there.
// Call it after the warm-up, when the scheduler has placed the pollers
// on CPUs of their own.
func holdThreads() (int, error) {
	runtime.LockOSThread()
	var cpu, node uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), uintptr(unsafe.Pointer(&node)), 0); e != 0 {
		return -1, fmt.Errorf("getcpu: %w", e)
	}
	var set unix.CPUSet
	set.Set(int(cpu))
	// A thread the runtime starts while this runs is a copy of its
	// parent's affinity as it was when the kernel began copying the
	// parent, and it shows in the listing only once the copy is done. A
	// parent held mid-copy moves to this CPU, where it waits for this
	// thread to let it run: until then its new thread has the affinity
	// from before and is not listed (the test made threads while this ran:
	// 1 in 15 such runs ended with an unheld thread when this did not
	// sleep). So: hold each listed thread that is not held, sleep so that
	// threads moved here can finish what they were doing, and list again,
	// until two listings in a row, each after a sleep, find every thread
	// held. Threads started later are copies of held ones.
	for clean, pass := 0, 0; clean < 2; pass++ {
		if pass == 100 { // something else keeps moving them
			return -1, errors.New("threads still not held after 100 rounds of sched_setaffinity")
		}
		if pass > 0 {
			time.Sleep(time.Millisecond)
		}
		clean++
		for _, tid := range threadIDs() {
			var now unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &now); err != nil {
				continue // exited since the listing (ESRCH): it needs nothing
			}
			if now == set {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return -1, fmt.Errorf("sched_setaffinity of thread %d: %w", tid, err)
			}
			clean = 0
		}
	}
	return int(cpu), nil
}
