package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
)

// sched is what the kernel says of how one thread is scheduled: what
// goverbs perf and pingpong leave as the runtime made it, -cpu's one
// thread aside.
type sched struct {
	policy int    // /proc/…/stat field 41: SCHED_OTHER 0, SCHED_IDLE 5, …
	nice   int    // field 19
	cpus   string // Cpus_allowed_list in /proc/…/status
}

func (s sched) String() string {
	return fmt.Sprintf("policy %d, nice %d, CPUs %s", s.policy, s.nice, s.cpus)
}

// readThread reads one thread's sched and its CPU time so far (utime
// plus stime, fields 14 and 15, in clock ticks) from dir, a
// /proc/…/task/TID directory; ok is false if the thread is gone.
func readThread(dir string) (s sched, cpuTime int64, running, ok bool) {
	stat, err1 := os.ReadFile(dir + "/stat")
	status, err2 := os.ReadFile(dir + "/status")
	if err1 != nil || err2 != nil {
		return sched{}, 0, false, false
	}
	// After the command name, in parentheses: field 3 on.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return sched{}, 0, false, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) <= 41-3 {
		return sched{}, 0, false, false
	}
	field := func(n int) int64 { v, _ := strconv.ParseInt(f[n-3], 10, 64); return v }
	s.policy, s.nice = int(field(41)), int(field(19))
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			s.cpus = strings.TrimSpace(v)
		}
	}
	return s, field(14) + field(15), f[0] == "R", s.cpus != ""
}

// threadSeen is what sampling saw of one thread of a child.
type threadSeen struct {
	scheds  map[sched]bool
	cpuTime int64 // the last reading
	running int   // readings that found it running
}

// watchThreads reads every thread of process pid until done is closed,
// every few milliseconds: more often, on a machine whose cores the two
// pollers fill (the VM's two), it would take a poller's core itself.
func watchThreads(pid int, done <-chan struct{}) map[int]*threadSeen {
	seen := map[int]*threadSeen{}
	task := "/proc/" + strconv.Itoa(pid) + "/task/"
	for {
		select {
		case <-done:
			return seen
		default:
		}
		ents, _ := os.ReadDir(task)
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			s, cpuTime, running, ok := readThread(task + e.Name())
			if !ok {
				continue // gone since the listing
			}
			t := seen[tid]
			if t == nil {
				t = &threadSeen{scheds: map[sched]bool{}}
				seen[tid] = t
			}
			t.scheds[s] = true
			t.cpuTime = max(t.cpuTime, cpuTime)
			if running {
				t.running++
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// listening reports whether some socket listens on TCP port, IPv4 or 6.
func listening(port int) bool {
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n") {
			if g := strings.Fields(l); len(g) > 3 && strings.HasSuffix(g[1], want) && g[3] == "0A" { // TCP_LISTEN
				return true
			}
		}
	}
	return false
}

// TestToolsLeaveThreads runs goverbs perf and pingpong, server and client
// on rxe0, and reads every thread of both processes while they run: no
// thread changes its scheduling policy, nice value or CPU affinity;
// with -cpu N, exactly one thread, the busiest (the poller), has CPU N
// alone for its affinity, and the others are untouched.
func TestToolsLeaveThreads(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	const bin = "/bin/goverbs"
	if _, err := os.Stat(bin); err != nil {
		if testutil.InVM() {
			t.Fatalf("the VM harness puts the goverbs tool at %s: %v", bin, err)
		}
		t.Skipf("no %s outside the VM harness", bin)
	}
	// The children start as copies of this thread, as the runtime made it.
	runtime.LockOSThread()
	base, _, _, ok := readThread("/proc/thread-self")
	runtime.UnlockOSThread()
	if !ok {
		t.Fatal("cannot read /proc/thread-self")
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := 0; len(cpus) < allowed.Count(); c++ {
		if allowed.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	// Server and client on CPUs of their own where there are two.
	srvCPU, cliCPU := cpus[0], cpus[len(cpus)-1]
	port := 18600
	// Runs long enough for the watcher to see each thread many times
	// (it looks every 5 ms), not for a latency figure.
	for _, tool := range [][]string{
		{"perf", "-t", "send_lat", "-n", "300"},
		{"pingpong", "-s", "64", "-n", "200"},
	} {
		for _, pin := range []bool{false, true} {
			name := tool[0]
			if pin {
				name += " -cpu"
			}
			t.Run(name, func(t *testing.T) {
				port++
				args := append(append([]string{}, tool...), "-d", "rxe0", "-g", "1", "-p", strconv.Itoa(port))
				srvArgs, cliArgs := args, append(append([]string{}, args...), "127.0.0.1")
				if pin {
					srvArgs = append(append([]string{}, tool...), append([]string{"-cpu", strconv.Itoa(srvCPU)}, args[len(tool):]...)...)
					cliArgs = append(append([]string{}, tool...), append([]string{"-cpu", strconv.Itoa(cliCPU)}, cliArgs[len(tool):]...)...)
				}
				type side struct {
					name string
					cmd  *exec.Cmd
					out  bytes.Buffer
					cpu  int
					seen chan map[int]*threadSeen
					done chan struct{}
				}
				start := func(name string, cpu int, args []string) *side {
					s := &side{name: name, cpu: cpu, seen: make(chan map[int]*threadSeen, 1), done: make(chan struct{})}
					s.cmd = exec.Command(bin, args...)
					s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
					if err := s.cmd.Start(); err != nil {
						t.Fatal(err)
					}
					go func() { s.seen <- watchThreads(s.cmd.Process.Pid, s.done) }()
					return s
				}
				wait := func(s *side) error {
					err := s.cmd.Wait()
					close(s.done)
					return err
				}
				srv := start("server", srvCPU, srvArgs)
				for deadline := time.Now().Add(30 * time.Second); !listening(port); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						srv.cmd.Process.Kill()
						wait(srv)
						t.Fatalf("goverbs %s: not listening on port %d after 30 s:\n%s", strings.Join(srvArgs, " "), port, &srv.out)
					}
				}
				began := time.Now()
				cli := start("client", cliCPU, cliArgs)
				for _, s := range []*side{cli, srv} {
					timer := time.AfterFunc(2*time.Minute, func() { s.cmd.Process.Kill() })
					err := wait(s)
					timer.Stop()
					if err != nil {
						t.Errorf("goverbs %s (%s): %v\n%s", strings.Join(s.cmd.Args[1:], " "), s.name, err, &s.out)
					}
				}
				if t.Failed() {
					return
				}
				t.Logf("client and server done in %v; the client says:\n%s", time.Since(began).Round(time.Millisecond), &cli.out)
				for _, s := range []*side{srv, cli} {
					checkThreads(t, s.name, <-s.seen, base, pin, s.cpu)
				}
			})
		}
	}
}

// checkThreads checks what watchThreads saw of one child.
func checkThreads(t *testing.T, name string, seen map[int]*threadSeen, base sched, pin bool, cpu int) {
	t.Helper()
	if len(seen) == 0 {
		t.Errorf("%s: no thread read", name)
		return
	}
	pinned := base
	pinned.cpus = strconv.Itoa(cpu)
	busiest, pinnedTIDs := 0, []int{}
	for tid, th := range seen {
		if b := seen[busiest]; b == nil || th.cpuTime > b.cpuTime || th.cpuTime == b.cpuTime && th.running > b.running {
			busiest = tid
		}
		for s := range th.scheds {
			switch {
			case s == base:
			case pin && s == pinned:
				pinnedTIDs = append(pinnedTIDs, tid)
			default:
				t.Errorf("%s: thread %d was seen with %v; want %v, as the runtime made it", name, tid, s, base)
			}
		}
	}
	t.Logf("%s: %d threads; the busiest, %d, ran %d ticks and was seen running %d times", name, len(seen), busiest, seen[busiest].cpuTime, seen[busiest].running)
	if !pin {
		return
	}
	if len(pinnedTIDs) != 1 || pinnedTIDs[0] != busiest {
		t.Errorf("%s: -cpu %d: threads seen on CPU %d alone: %v; want the poller's only, %d, the busiest", name, cpu, cpu, pinnedTIDs, busiest)
	}
}

// TestCPUFlag: -cpu takes a CPU this process may run on, and a bad one is
// a usage error that names the flag.
func TestCPUFlag(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	first := 0
	for !allowed.IsSet(first) {
		first++
	}
	outside := setBits // past any CPU a CPUSet holds
	for _, tc := range []struct {
		arg  string
		want string // in the error; "" for none
	}{
		{strconv.Itoa(first), ""},
		{"-1", `invalid value "-1" for flag -cpu: CPU -1 is negative`},
		{strconv.Itoa(outside), fmt.Sprintf("for flag -cpu: CPU %d is not one this process may run on (%s)", outside, cpuList(&allowed))},
		{"x", `invalid value "x" for flag -cpu: not a CPU number`},
	} {
		fs := flag.NewFlagSet("perf", flag.ContinueOnError)
		var out bytes.Buffer
		fs.SetOutput(&out)
		var f cpuFlag
		fs.Var(&f, "cpu", cpuUsage)
		err := fs.Parse([]string{"-cpu", tc.arg})
		switch {
		case tc.want == "" && (err != nil || !f.set || f.cpu != first):
			t.Errorf("-cpu %s: %v, flag %+v; want CPU %d set", tc.arg, err, f, first)
		case tc.want != "" && (err == nil || !strings.Contains(out.String(), tc.want)):
			t.Errorf("-cpu %s: error %v, output %q; want %q in it", tc.arg, err, out.String(), tc.want)
		}
	}
}

// TestCPUList holds cpuList to the kernel's list format.
func TestCPUList(t *testing.T) {
	for _, tc := range []struct {
		cpus []int
		want string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{0, 1, 2, 3}, "0-3"},
		{[]int{0, 2, 3, 4, 7, 9, 10}, "0,2-4,7,9-10"},
		{[]int{1023}, "1023"},
	} {
		var s unix.CPUSet
		for _, c := range tc.cpus {
			s.Set(c)
		}
		if got := cpuList(&s); got != tc.want {
			t.Errorf("cpuList(%v) = %q, want %q", tc.cpus, got, tc.want)
		}
	}
}

// TestPin: -cpu pins the calling goroutine's thread and no other, and the
// func it returns gives the thread its affinity back.
func TestPin(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	var f cpuFlag
	if err := f.Set(strconv.Itoa(lastCPU(&all))); err != nil {
		t.Fatal(err)
	}
	type result struct {
		tid           int
		pinned, after unix.CPUSet
		err           error
	}
	ch := make(chan result)
	go func() {
		var r result
		unpin, err := f.pin()
		if err != nil {
			ch <- result{err: err}
			return
		}
		r.tid = unix.Gettid()
		unix.SchedGetaffinity(0, &r.pinned)
		// While pinned, the other threads of this process keep theirs.
		for _, e := range threadDirs(t) {
			if tid, _ := strconv.Atoi(e); tid != r.tid {
				var s unix.CPUSet
				if unix.SchedGetaffinity(tid, &s) == nil && s != all {
					r.err = fmt.Errorf("thread %d has %s while thread %d is pinned; want %s", tid, cpuList(&s), r.tid, cpuList(&all))
				}
			}
		}
		unpin()
		unix.SchedGetaffinity(0, &r.after)
		ch <- r
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.pinned.Count() != 1 || !r.pinned.IsSet(f.cpu) {
		t.Errorf("pinned thread %d has CPUs %s, want %d", r.tid, cpuList(&r.pinned), f.cpu)
	}
	if r.after != all {
		t.Errorf("after unpin, thread %d has CPUs %s, want %s", r.tid, cpuList(&r.after), cpuList(&all))
	}
	var unset cpuFlag
	if unpin, err := unset.pin(); err != nil {
		t.Errorf("no -cpu: pin: %v", err)
	} else {
		unpin()
	}
}

func lastCPU(s *unix.CPUSet) int {
	c := setBits - 1
	for !s.IsSet(c) {
		c--
	}
	return c
}

func threadDirs(t *testing.T) []string {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Error(err)
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names
}
