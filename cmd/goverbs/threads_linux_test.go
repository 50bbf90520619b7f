package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMonitorThread checks that the thread monitorThread picks behaves as
// sysmon: while a goroutine spins, sysmon sleeps between its rounds in
// nanosleep(2), where no other thread of a Go process sleeps.
func TestMonitorThread(t *testing.T) {
	skipUnderEmulator(t)
	tid := monitorThread()
	if tid == 0 {
		t.Fatal("monitorThread: none found")
	}
	path := fmt.Sprintf("/proc/self/task/%d/syscall", tid)
	seen := map[string]int{}
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
		call, nr := inSyscall(t, path)
		if nr == unix.SYS_NANOSLEEP || nr == unix.SYS_CLOCK_NANOSLEEP {
			return
		}
		seen[call]++
	}
	t.Errorf("thread %d never seen in nanosleep in 200 ms of spinning; seen in (system call: readings) %v", tid, seen)
}

// TestQuietMonitor runs quietMonitor in a child process, this test binary
// again (init below), so that this process's own monitor keeps its
// priority, and checks the policy the kernel then reports for the child's
// monitor thread.
func TestQuietMonitor(t *testing.T) {
	skipUnderEmulator(t)
	for _, tc := range []struct {
		mode string
		want uint32
		nice int
	}{
		{"idle", unix.SCHED_IDLE, 0},
		{"nice", unix.SCHED_NORMAL, 19},
		{"normal", unix.SCHED_NORMAL, 0},
	} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "GOVERBS_TEST_QUIET_MONITOR="+tc.mode)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("-sysmon=%s: child: %v\n%s", tc.mode, err, out)
		}
		if got := fmt.Sprintf("policy=%d nice=%d", tc.want, tc.nice); !strings.Contains(string(out), got) {
			t.Errorf("-sysmon=%s: child's monitor thread: want %s in\n%s", tc.mode, got, out)
		}
		if strings.Contains(string(out), "goverbs:") {
			t.Errorf("-sysmon=%s: the child printed a warning:\n%s", tc.mode, out)
		}
	}
}

// init is the child's half of TestQuietMonitor: run with
// GOVERBS_TEST_QUIET_MONITOR set, the test binary moves its monitor
// thread, prints the policy the kernel then reports for it and exits
// before any test runs.
func init() {
	mode := os.Getenv("GOVERBS_TEST_QUIET_MONITOR")
	if mode == "" {
		return
	}
	quietMonitor(mode)
	tid := monitorThread()
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		fmt.Println("sched_getattr:", err)
		os.Exit(1)
	}
	fmt.Printf("monitor thread %d policy=%d nice=%d\n", tid, attr.Policy, attr.Nice)
	os.Exit(0)
}

// skipUnderEmulator skips a test of the runtime's threads when this test
// binary is not run by the kernel itself but by a user-mode emulator
// (make bigendian: GOARCH=s390x under qemu-user): the threads and system
// calls /proc shows are then the emulator's, and its first thread is its
// own. The sign: a thread reading its own /proc/thread-self/syscall sees
// the number of the read(2) it is in, which under an emulator is the
// host's number for read, not this GOARCH's.
func skipUnderEmulator(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	call, nr := inSyscall(t, "/proc/thread-self/syscall")
	runtime.UnlockOSThread()
	if nr != unix.SYS_READ {
		t.Skipf("this %s test binary runs under a user-mode emulator: the kernel sees its read(2) as system call %s, not %d; /proc shows the emulator's threads", runtime.GOARCH, call, unix.SYS_READ)
	}
}

// inSyscall reads a thread's syscall file (/proc/…/syscall): the first
// word as it stands ("running", or the number of the system call the
// thread is in), and that number, or -1.
func inSyscall(t *testing.T, path string) (string, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		t.Fatalf("%s: %q", path, b)
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil {
		return f[0], -1
	}
	return f[0], nr
}

// TestHoldThreads: every thread, the caller's too, is held to the CPU the
// caller ran on, those the runtime starts while holdThreads runs among
// them. (Listing the threads once missed those: this test failed in 6 of
// 300 runs on 6.12 before it made threads of its own while holdThreads
// ran, and in 71 of 200 after.)
func TestHoldThreads(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	// A few more threads: goroutines locked to their own, blocked.
	lockedThread := func() {
		started := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(started)
			<-done
		}()
		<-started
	}
	for range 3 {
		lockedThread()
	}
	// And more of them while holdThreads runs, each a new thread.
	holding, churned := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(churned)
		for range 30 {
			select {
			case <-holding:
				return
			default:
				lockedThread()
			}
		}
	}()
	cpu, err := holdThreads()
	close(holding)
	<-churned
	if err != nil {
		t.Fatal(err)
	}
	defer func() { // give the test binary its threads back
		for _, tid := range threadIDs() {
			_ = unix.SchedSetaffinity(tid, &all)
		}
	}()
	held := 0
	for _, tid := range threadIDs() {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue // exited
		}
		if set.Count() != 1 || !set.IsSet(cpu) {
			t.Errorf("thread %d: %d CPUs, CPU %d set: %v; want only CPU %d", tid, set.Count(), cpu, set.IsSet(cpu), cpu)
		}
		held++
	}
	if held < 4 {
		t.Errorf("%d threads held, want at least the caller's and the 3 started", held)
	}
}
