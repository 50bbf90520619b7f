//go:build linux

// Command guest is the VM harness's /init: a static Go program that turns
// a bare kernel with an initramfs into a soft-RoCE test machine. It mounts
// proc, sysfs, devtmpfs and a tmpfs, loads the kernel modules with
// finit_module, brings up the netdevs, creates the rxe devices over RDMA
// netlink, runs the steps of the plan with their output on the console,
// prints the exit marker and powers the machine off.
//
// It is built by the harness (go run ./test/vm) and never run by hand.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/test/vm/internal/plan"
)

func main() {
	if os.Getpid() != 1 {
		// Run as a step of the harness's self-test: hang.
		if len(os.Args) > 1 && os.Args[1] == "hang" {
			for {
				time.Sleep(time.Hour)
			}
		}
		// Run as a step: print files for the host to take out (profiles).
		if len(os.Args) > 1 && os.Args[1] == "dump" {
			os.Exit(dump(os.Args[2:]))
		}
		fmt.Fprintln(os.Stderr, "guest: this is the VM harness's /init; it runs as PID 1 only")
		os.Exit(2)
	}
	fmt.Println(plan.MarkInit)
	rc := 1
	func() {
		defer func() {
			if r := recover(); r != nil {
				fmt.Printf("init: panic: %v\n", r)
			}
		}()
		rc = run()
	}()
	fmt.Printf("%s%d\n", plan.MarkExit, rc)
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Printf("init: power off: %v\n", err)
	}
	for { // the kernel panics if init returns; the host already has its marker
		time.Sleep(time.Hour)
	}
}

func run() int {
	if err := mountAll(); err != nil {
		fmt.Println("init:", err)
		return 1
	}
	raw, err := os.ReadFile(plan.Path)
	if err != nil {
		fmt.Println("init:", err)
		return 1
	}
	var p plan.Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		fmt.Println("init: plan:", err)
		return 1
	}
	if p.Break == "exit" {
		fmt.Println("init: returning from /init on purpose (harness self-test)")
		os.Exit(0)
	}
	if err := setup(&p); err != nil {
		fmt.Println("init: setup:", err)
		dumpKernelLog(40)
		return 1
	}
	rc := 0
	var bg []chan int
	var stops []chan struct{} // the StopAfterNext steps' since the last foreground step
	for _, s := range p.Steps {
		if s.DelayMs > 0 {
			time.Sleep(time.Duration(s.DelayMs) * time.Millisecond)
		}
		if s.Background {
			done := make(chan int, 1)
			var stop chan struct{}
			if s.StopAfterNext {
				stop = make(chan struct{})
				stops = append(stops, stop)
			}
			go func(s plan.Step) { done <- step(&p, s, stop) }(s)
			bg = append(bg, done)
			continue
		}
		code := step(&p, s, nil)
		for _, stop := range stops {
			close(stop)
		}
		stops = nil
		if code != 0 && rc == 0 {
			rc = code
		}
	}
	for _, stop := range stops {
		close(stop)
	}
	for _, done := range bg { // each has its own time limit
		if code := <-done; code != 0 && rc == 0 {
			rc = code
		}
	}
	return rc
}

func mountAll() error {
	for _, m := range []struct{ src, dst, fstype string }{
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
		{"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/tmp", "tmpfs"},
		{"tmpfs", "/run", "tmpfs"},
	} {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.dst, err)
		}
	}
	return nil
}

func setup(p *plan.Plan) error {
	start := time.Now()
	for _, m := range p.Modules {
		if err := loadModule(m); err != nil {
			return err
		}
	}
	if err := netlink.LinkSetUp("lo"); err != nil {
		return err
	}
	// IPv6 addresses usable as soon as they are added, link-local ones
	// included (nobody else is on the guest's links to answer DAD), and
	// kept while their netdev is down, as IPv4 ones are: tests take d0
	// down and up, and the tests after them use its addresses.
	for _, c := range []string{"all", "default"} {
		for _, set := range []string{"accept_dad=0", "keep_addr_on_down=1"} {
			k, v, _ := strings.Cut(set, "=")
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+c+"/"+k, []byte(v), 0); err != nil {
				return err
			}
		}
	}
	for _, n := range p.Netdevs {
		var err error
		if n.Kind == "veth" {
			err = netlink.VethAdd(n.Name, n.Peer)
		} else {
			err = netlink.LinkAdd(n.Name, n.Kind)
		}
		if err != nil {
			return err
		}
		for _, a := range [][2]string{{n.Name, n.Addr}, {n.Name, n.Addr6}, {n.Peer, n.PeerAddr}} {
			if a[1] == "" {
				continue
			}
			pfx, err := netip.ParsePrefix(a[1])
			if err != nil {
				return err
			}
			if err := netlink.AddrAdd(a[0], pfx); err != nil {
				return err
			}
		}
		for _, name := range []string{n.Name, n.Peer} {
			if name == "" {
				continue
			}
			if err := netlink.LinkSetUp(name); err != nil {
				return err
			}
		}
		if n.Addr != "" && n.PeerAddr != "" {
			if err := crossRoute(n); err != nil {
				return err
			}
		}
	}
	for _, l := range p.RDMALinks {
		if err := netlink.RDMALinkAdd(l.Name, l.Type, l.Netdev); err != nil {
			return err
		}
		if l.WaitFor != "" {
			if err := waitFor(l.WaitFor, 10*time.Second); err != nil {
				return err
			}
		}
	}
	var devs []string
	for _, d := range p.Devices {
		if err := waitFor(d, 10*time.Second); err != nil {
			return err
		}
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		devs = append(devs, fmt.Sprintf("%s %v", d, st.Mode()))
	}
	fmt.Printf("init: %d modules, %d netdevs, %d RDMA links ready in %v (%s)\n",
		len(p.Modules), len(p.Netdevs), len(p.RDMALinks), time.Since(start).Round(time.Millisecond), strings.Join(devs, ", "))
	return nil
}

// crossRoute makes the traffic between a veth pair's two local addresses
// cross the pair. Both addresses are the host's own, so the local table
// would send it through the loopback (and rxe would loop it back inside
// the device): rules ahead of the local table send what the host itself
// sends (iif lo) to either address out of the other end, and
// accept_local lets each end take packets from the host's own address.
func crossRoute(n plan.Netdev) error {
	a, err := netip.ParsePrefix(n.Addr)
	if err != nil {
		return err
	}
	b, err := netip.ParsePrefix(n.PeerAddr)
	if err != nil {
		return err
	}
	for _, dev := range []string{"all", n.Name, n.Peer} {
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+dev+"/accept_local", []byte("1"), 0); err != nil {
			return err
		}
	}
	const tableA, tableB = 100, 101 // to b out of n.Name; to a out of n.Peer
	if err := netlink.RouteAdd(netip.PrefixFrom(b.Addr(), 32), n.Name, tableA); err != nil {
		return err
	}
	if err := netlink.RouteAdd(netip.PrefixFrom(a.Addr(), 32), n.Peer, tableB); err != nil {
		return err
	}
	for _, r := range []netlink.Rule{
		{Pref: 10, Iif: "lo", Dst: netip.PrefixFrom(b.Addr(), 32), Table: tableA},
		{Pref: 11, Iif: "lo", Dst: netip.PrefixFrom(a.Addr(), 32), Table: tableB},
		{Pref: 1000, Table: unix.RT_TABLE_LOCAL},
	} {
		if err := netlink.RuleAdd(r); err != nil {
			return err
		}
	}
	return netlink.RuleDel(netlink.Rule{Pref: 0, Table: unix.RT_TABLE_LOCAL})
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("finit_module %s: %w", path, err)
	}
	return nil
}

func waitFor(path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %v: %w", path, limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// step runs s; a close of stop interrupts it (SIGINT), and its end by
// that signal, or its exit 0, is then success.
func step(p *plan.Plan, s plan.Step, stop <-chan struct{}) int {
	fmt.Printf("init: === %s: %s\n", s.Name, strings.Join(s.Argv, " "))
	ctx := context.Background()
	if s.TimeoutSec > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(s.TimeoutSec)*time.Second)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, s.Argv[0], s.Argv[1:]...)
	cmd.Dir = s.Dir
	var out io.Writer = os.Stdout
	if s.Prefix != "" {
		pw := &prefixWriter{prefix: s.Prefix, w: os.Stdout}
		defer pw.flush()
		out = pw
	}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", "TMPDIR=/tmp",
		plan.EnvInVM + "=1"}, p.Env...)
	cmd.Env = append(cmd.Env, s.Env...)
	if s.LibPath != "" {
		cmd.Env = append(cmd.Env, "LD_LIBRARY_PATH="+s.LibPath)
	}
	var before map[string]int64
	if s.Counters != "" {
		before = readCounters(s.Counters)
	}
	start := time.Now()
	err := cmd.Start()
	stopped := make(chan bool, 1)
	if err == nil {
		exited := make(chan struct{})
		go func() {
			select {
			case <-stop: // nil: never
				stopped <- true
				cmd.Process.Signal(os.Interrupt)
			case <-exited:
				stopped <- false
			}
		}()
		err = cmd.Wait()
		close(exited)
		if <-stopped {
			fmt.Printf("init: %s: interrupted after the next step, as planned\n", s.Name)
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGINT {
					err = nil // the interrupt ended it
				}
			}
		}
	}
	took := time.Since(start).Round(time.Millisecond)
	if s.Counters != "" {
		printCounters(s.Name, before, readCounters(s.Counters))
	}
	rc := 0
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		fmt.Printf("init: %s: killed after %ds time limit\n", s.Name, s.TimeoutSec)
		rc = 124
	case errors.As(err, &ee):
		rc = ee.ExitCode()
		if rc < 0 {
			rc = 128 // killed by a signal
		}
	default:
		fmt.Printf("init: %s: %v\n", s.Name, err)
		rc = 127
	}
	if rc != 0 {
		dumpKernelLog(20)
	}
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			// Where the step's time went: the benchmarks' tools compare by it.
			fmt.Printf("init: %s: user %v, sys %v, %d voluntary and %d involuntary context switches\n", s.Name,
				time.Duration(ru.Utime.Nano()).Round(time.Millisecond), time.Duration(ru.Stime.Nano()).Round(time.Millisecond),
				ru.Nvcsw, ru.Nivcsw)
		}
	}
	fmt.Printf("%s%s rc=%d took=%v\n", plan.MarkStep, s.Name, rc, took)
	return rc
}

// prefixWriter writes whole lines, each after a prefix.
type prefixWriter struct {
	mu     sync.Mutex
	prefix string
	w      io.Writer
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i])
		p.buf = p.buf[i+1:]
	}
}

func (p *prefixWriter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf)
		p.buf = nil
	}
}

// readCounters reads every file of dir as a decimal counter; files that
// are not one are left out.
func readCounters(dir string) map[string]int64 {
	m := map[string]int64{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			m[e.Name()] = v
		}
	}
	return m
}

// printCounters prints, in one line, the counters that moved.
func printCounters(name string, before, after map[string]int64) {
	keys := make([]string, 0, len(after))
	for k := range after {
		if after[k] != before[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, after[k]-before[k])
	}
	fmt.Printf("init: %s: counters:%s\n", name, b.String())
}

// dumpKernelLog prints the last n lines of the kernel log, to explain a failure.
func dumpKernelLog(n int) {
	buf := make([]byte, 1<<20)
	k, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err != nil || k <= 0 {
		return
	}
	lines := strings.Split(strings.TrimRight(string(buf[:k]), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	fmt.Printf("init: last %d kernel log lines:\n", len(lines))
	for _, l := range lines {
		fmt.Println("  dmesg:", l)
	}
}

// dump prints each file on the console as plan.MarkFile lines: the VM
// has no other way out. A missing file is reported and skipped.
func dump(paths []string) int {
	rc := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			fmt.Println("init: dump:", err)
			rc = 1
			continue
		}
		name := filepath.Base(p)
		enc := base64.StdEncoding.EncodeToString(data)
		for len(enc) > 0 {
			n := min(len(enc), 96)
			fmt.Printf("%s%s %s\n", plan.MarkFile, name, enc[:n])
			enc = enc[n:]
		}
		fmt.Printf("%s%s end\n", plan.MarkFile, name)
	}
	return rc
}
