package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// onePoller gives the Go scheduler one P, as perftest and ibv_rc_pingpong
// run on one thread, unless GOMAXPROCS is set in the environment. The
// tools poll in one goroutine that never blocks: a second P would only
// wake threads that look for work each time the runtime preempts the
// poller, and on a machine with no core to spare those take a CPU from
// a poller.
func onePoller() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// cpuFlag is the tools' -cpu: the CPU the polling thread is pinned to.
// Its zero value means no -cpu, and then no thread is touched. Set
// refuses a CPU the process may not run on, so that a bad -cpu is a
// usage error naming the flag.
type cpuFlag struct {
	cpu int
	set bool
}

const cpuUsage = "pin the polling thread, and no other, to CPU `N` (sched_setaffinity of that one thread); " +
	"without it no thread's CPUs or priority change: as with perftest, placement is left to the user (taskset)"

func (f *cpuFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return strconv.Itoa(f.cpu)
}

func (f *cpuFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not a CPU number")
	}
	if n < 0 {
		return fmt.Errorf("CPU %d is negative", n)
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	if !allowed.IsSet(n) {
		return fmt.Errorf("CPU %d is not one this process may run on (%s)", n, cpuList(&allowed))
	}
	f.cpu, f.set = n, true
	return nil
}

// setBits is how many CPUs a unix.CPUSet holds (the kernel's CPU_SETSIZE).
const setBits = int(unsafe.Sizeof(unix.CPUSet{})) * 8

// cpuList writes a CPU set as the kernel's lists do (Cpus_allowed_list):
// "0-3,6".
func cpuList(s *unix.CPUSet) string {
	var b strings.Builder
	for c := 0; c < setBits; c++ {
		if !s.IsSet(c) {
			continue
		}
		end := c
		for end+1 < setBits && s.IsSet(end+1) {
			end++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c))
		if end > c {
			b.WriteString("-" + strconv.Itoa(end))
		}
		c = end
	}
	return b.String()
}

// pin is -cpu: unless f is unset, it locks the calling goroutine, the
// poller, to its thread and pins that thread alone to the CPU. The
// runtime's other threads keep the affinity they have, and the threads it
// starts later are not copies of the pinned one (the runtime starts
// threads for a locked one from a thread of its own). Calling it before
// the poller allocates its buffers and rings puts their memory on the
// CPU's NUMA node, as taskset does for perftest.
//
// The returned func gives the thread its former affinity back and
// unlocks it; should that fail, the goroutine stays locked, so that the
// pinned thread never runs another goroutine.
func (f *cpuFlag) pin() (unpin func(), err error) {
	if !f.set {
		return func() {}, nil
	}
	runtime.LockOSThread()
	var was, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("-cpu %d: sched_getaffinity: %w", f.cpu, err)
	}
	set.Set(f.cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil { // 0: this thread only
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("-cpu %d: sched_setaffinity: %w", f.cpu, err)
	}
	return func() {
		if unix.SchedSetaffinity(0, &was) == nil {
			runtime.UnlockOSThread()
		}
	}, nil
}

// warmUp is -warmup: it spins for d, not blocking, between the sides'
// meeting and the timed loop, for a CPU whose clock rises under load.
// The default, 0, measures from the first iteration on.
func warmUp(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}
