//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A kernel profile of one step: perf_event_open(2) on every CPU of the
// guest, system-wide, sampling the CPU clock with the kernel's call chain,
// read from the events' rings after the step and resolved against
// /proc/kallsyms. The guest has no perf binary (and no room for its
// libraries); this is the part of it that tells where the kernel's time
// goes, and in which process's name, while two tools do the same work.

// kprofRingPages is each CPU's ring, in pages: at 1000 samples a second
// and about 200 bytes a sample (a call chain of 20 frames), 8 MiB hold
// 40 s; a run that overflows it says how many samples it lost.
const kprofRingPages = 2048

// kprofMaxStack caps each sample's kernel call chain.
const kprofMaxStack = 32

type kprof struct {
	hz    int
	fds   []int
	rings [][]byte
	comms map[uint32]string // pid → name: at start from /proc, then from COMM records
	kthr  map[uint32]bool   // kernel threads (kthreadd's children), which keep the last address space
	irqs  map[string]int64  // /proc/interrupts and /proc/stat's ctxt at start
}

// startKProf opens and enables one sampling event per CPU.
func startKProf(hz int) (*kprof, error) {
	// Root sees kernel addresses in kallsyms only with kptr_restrict below 2;
	// system-wide events need perf_event_paranoid at most 0 without CAP_PERFMON.
	_ = os.WriteFile("/proc/sys/kernel/kptr_restrict", []byte("0"), 0)
	_ = os.WriteFile("/proc/sys/kernel/perf_event_paranoid", []byte("-1"), 0)
	k := &kprof{hz: hz, comms: map[uint32]string{0: "idle"}, kthr: map[uint32]bool{0: true}}
	procs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, p := range procs {
		dir := filepath.Dir(p)
		pid, err := strconv.ParseUint(filepath.Base(dir), 10, 32)
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			k.comms[uint32(pid)] = strings.TrimSpace(string(b))
		}
		if b, err := os.ReadFile(dir + "/stat"); err == nil {
			// "pid (comm) state ppid …": the comm may hold spaces.
			if i := bytes.LastIndexByte(b, ')'); i > 0 {
				if fs := strings.Fields(string(b[i+1:])); len(fs) > 1 && (fs[1] == "2" || pid == 2) {
					k.kthr[uint32(pid)] = true
				}
			}
		}
	}
	k.irqs = readInterrupts()
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_SOFTWARE,
		Config:      unix.PERF_COUNT_SW_CPU_CLOCK,
		Sample:      uint64(1e9 / hz), // a period, in ns of CPU clock
		Sample_type: unix.PERF_SAMPLE_IP | unix.PERF_SAMPLE_TID | unix.PERF_SAMPLE_CALLCHAIN,
		// Comm, Task: names and new threads; ContextSwitch: a record for
		// each switch on the CPU, with the pid and tid of the task it
		// switches to (SampleIDAll: and of the one it leaves).
		Bits: unix.PerfBitDisabled | unix.PerfBitComm | unix.PerfBitTask | unix.PerfBitContextSwitch |
			unix.PerfBitSampleIDAll | unix.PerfBitExcludeCallchainUser,
		// Sample_max_stack caps the chain (kernel 4.8 on).
		Sample_max_stack: kprofMaxStack,
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	page := os.Getpagesize()
	for cpu := range runtime.NumCPU() {
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			k.close()
			return nil, fmt.Errorf("perf_event_open on cpu %d: %w", cpu, err)
		}
		k.fds = append(k.fds, fd)
		ring, err := unix.Mmap(fd, 0, (1+kprofRingPages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			k.close()
			return nil, fmt.Errorf("mmap perf ring of cpu %d: %w", cpu, err)
		}
		k.rings = append(k.rings, ring)
	}
	for _, fd := range k.fds {
		if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
			k.close()
			return nil, fmt.Errorf("enable perf event: %w", err)
		}
	}
	return k, nil
}

func (k *kprof) close() {
	for _, r := range k.rings {
		_ = unix.Munmap(r)
	}
	for _, fd := range k.fds {
		_ = unix.Close(fd)
	}
	k.rings, k.fds = nil, nil
}

// kprofSample is one sample: who ran, in which mode, and the kernel's
// call chain (innermost first; for a user-mode sample, just its IP).
type kprofSample struct {
	pid    uint32
	kernel bool
	chain  []uint64
}

// stop disables the events, reads their rings and prints the profile:
// samples by process, kernel functions by their own samples, and by the
// samples whose call chain passes through them. client is the step's
// process, whose share each function line also gives. With out set, it
// also writes the samples there as folded stacks.
func (k *kprof) stop(name string, client int, out string) {
	for _, fd := range k.fds {
		_ = unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	}
	irqs := readInterrupts()
	var samples []kprofSample
	var lost uint64
	cpus := len(k.rings)
	switches := make([][]kprofSwitch, cpus)
	for i, ring := range k.rings {
		s, sw, l := k.parse(ring)
		samples = append(samples, s...)
		switches[i] = sw
		lost += l
	}
	k.close()
	syms := readKallsyms()
	fmt.Printf("init: %s: kernel profile: %d samples at %d Hz on %d CPUs (%d lost), %d kernel symbols\n",
		name, len(samples), k.hz, cpus, lost, len(syms.addr))
	printCounters(name+": interrupts", k.irqs, irqs)
	for cpu, sws := range switches {
		k.printSwitches(name, cpu, sws)
	}
	if len(samples) == 0 {
		return
	}
	if out != "" {
		if err := k.writeFolded(out, samples, syms, client); err != nil {
			fmt.Printf("init: %s: %v\n", name, err)
		}
	}
	total := float64(len(samples))
	pct := func(n int) string { return strconv.FormatFloat(100*float64(n)/total, 'f', 1, 64) + "%" }

	type who struct{ all, kern int }
	by := map[uint32]*who{}
	self := map[string][2]int{} // kernel function → samples, of them the client's
	incl := map[string][2]int{}
	seen := map[string]bool{}
	for _, s := range samples {
		w := by[s.pid]
		if w == nil {
			w = &who{}
			by[s.pid] = w
		}
		w.all++
		if s.kernel {
			w.kern++
		}
		if !s.kernel || s.pid == 0 { // user time and idle: no kernel functions to count
			continue
		}
		isClient := 0
		if int(s.pid) == client {
			isClient = 1
		}
		for i, ip := range s.chain {
			fn := syms.lookup(ip)
			if i == 0 {
				c := self[fn]
				c[0]++
				c[1] += isClient
				self[fn] = c
			}
			if !seen[fn] {
				seen[fn] = true
				c := incl[fn]
				c[0]++
				c[1] += isClient
				incl[fn] = c
			}
		}
		clear(seen)
	}
	pids := make([]uint32, 0, len(by))
	for p := range by {
		pids = append(pids, p)
	}
	sort.Slice(pids, func(i, j int) bool { return by[pids[i]].all > by[pids[j]].all })
	var b strings.Builder
	for i, p := range pids {
		if i == 8 {
			break
		}
		tag := ""
		if int(p) == client {
			tag = " (client)"
		}
		fmt.Fprintf(&b, " %s[%d]%s %s (kernel %s);", k.comm(p), p, tag, pct(by[p].all), pct(by[p].kern))
	}
	fmt.Printf("init: %s: kprof by process:%s\n", name, strings.TrimSuffix(b.String(), ";"))
	top := func(kind string, m map[string][2]int, n int) {
		for i, f := range keysByCount(m, func(c [2]int) int { return c[0] }) {
			if i == n {
				break
			}
			fmt.Printf("init: %s: kprof %s %6s %5d (client %5d) %s\n", name, kind, pct(m[f][0]), m[f][0], m[f][1], f)
		}
	}
	top("self", self, 30)
	top("incl", incl, 40)
}

// writeFolded writes one line per distinct stack: the process (the
// step's own marked "client"), the kernel's frames outermost first (or
// "[user]" and the user-mode address), and how many samples had it.
func (k *kprof) writeFolded(path string, samples []kprofSample, syms *kallsyms, client int) error {
	counts := map[string]int{}
	var b strings.Builder
	for _, s := range samples {
		b.Reset()
		b.WriteString(k.comm(s.pid))
		if int(s.pid) == client {
			b.WriteString("(client)")
		}
		if !s.kernel {
			// The user-mode address too, for resolving against the
			// binary on the host (go tool addr2line, or nm for C).
			fmt.Fprintf(&b, ";[user];%#x", s.chain[0])
		} else {
			for i := len(s.chain) - 1; i >= 0; i-- {
				b.WriteByte(';')
				fn, _, _ := strings.Cut(syms.lookup(s.chain[i]), " ")
				b.WriteString(fn)
			}
		}
		counts[b.String()]++
	}
	lines := make([]string, 0, len(counts))
	for st, n := range counts {
		lines = append(lines, st+" "+strconv.Itoa(n))
	}
	sort.Strings(lines)
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func (k *kprof) comm(pid uint32) string {
	if c, ok := k.comms[pid]; ok {
		return c
	}
	return "?"
}

// perfRecords calls fn with each record of a ring, read from its start:
// the profile never moves the tail, so the kernel stops writing (and
// counts what it loses) when it is full, and the records lie unwrapped
// between 0 and the head.
func perfRecords(ring []byte, fn func(typ uint32, misc uint16, rec []byte)) {
	meta := (*unix.PerfEventMmapPage)(unsafe.Pointer(&ring[0]))
	head := atomic.LoadUint64(&meta.Data_head)
	off, size := meta.Data_offset, meta.Data_size
	if off == 0 { // before 4.1
		off, size = uint64(os.Getpagesize()), uint64(len(ring)-os.Getpagesize())
	}
	data := ring[off : off+min(head, size)]
	for len(data) >= 8 {
		typ, misc, sz := le.Uint32(data), le.Uint16(data[4:]), int(le.Uint16(data[6:]))
		if sz < 8 || sz > len(data) {
			return
		}
		fn(typ, misc, data[8:sz])
		data = data[sz:]
	}
}

// le is the byte order of the records: the guests are amd64 and arm64.
var le = binary.LittleEndian

// parse reads one CPU's samples and context switches, and learns names
// and kernel threads from the COMM and FORK records among them.
func (k *kprof) parse(ring []byte) ([]kprofSample, []kprofSwitch, uint64) {
	var out []kprofSample
	var sws []kprofSwitch
	var lost uint64
	perfRecords(ring, func(typ uint32, misc uint16, rec []byte) {
		switch typ {
		case unix.PERF_RECORD_SAMPLE:
			if len(rec) < 24 {
				return
			}
			ip, pid, nr := le.Uint64(rec), le.Uint32(rec[8:]), int(le.Uint64(rec[16:]))
			kernel := misc&unix.PERF_RECORD_MISC_CPUMODE_MASK == unix.PERF_RECORD_MISC_KERNEL
			s := kprofSample{pid: pid, kernel: kernel}
			if kernel {
				for i := 0; i < nr && 24+8*i+8 <= len(rec); i++ {
					if a := le.Uint64(rec[24+8*i:]); a < perfContextMax {
						s.chain = append(s.chain, a)
					}
				}
			}
			if len(s.chain) == 0 {
				s.chain = []uint64{ip}
			}
			out = append(out, s)
		case unix.PERF_RECORD_COMM:
			if len(rec) > 8 {
				c, _, _ := bytes.Cut(rec[8:], []byte{0})
				k.comms[le.Uint32(rec)] = string(c)
			}
		case unix.PERF_RECORD_FORK: // pid, ppid, tid, ptid
			if len(rec) >= 16 && le.Uint32(rec[4:]) == 2 {
				k.kthr[le.Uint32(rec)] = true
			}
		case unix.PERF_RECORD_SWITCH_CPU_WIDE:
			// next's pid and tid, then (SampleIDAll, TID) the current
			// task's: on a switch out, the one leaving. The switch in
			// that follows tells the same switch again.
			if misc&unix.PERF_RECORD_MISC_SWITCH_OUT != 0 && len(rec) >= 16 {
				sws = append(sws, kprofSwitch{prev: le.Uint32(rec[8:]), next: le.Uint32(rec)})
			}
		case unix.PERF_RECORD_LOST:
			if len(rec) >= 16 {
				lost += le.Uint64(rec[8:])
			}
		}
	})
	return out, sws, lost
}

// kprofSwitch is one context switch on a CPU, between two processes
// (thread group ids; 0 is the idle task), in the order they came.
type kprofSwitch struct{ prev, next uint32 }

// printSwitches prints one CPU's context switches: how many, how many
// changed the address space (a switch to a user thread of another process
// than the last one the CPU ran; kernel threads and idle keep the last),
// and the most frequent pairs, by process.
func (k *kprof) printSwitches(name string, cpu int, sws []kprofSwitch) {
	label := func(pid uint32) string { return fmt.Sprintf("%s[%d]", k.comm(pid), pid) }
	pairs := map[string]int{}
	for _, sw := range sws {
		pairs[label(sw.prev)+"→"+label(sw.next)]++
	}
	var b strings.Builder
	for i, p := range keysByCount(pairs, func(n int) int { return n }) {
		if i == 8 {
			break
		}
		fmt.Fprintf(&b, " %s %d;", p, pairs[p])
	}
	fmt.Printf("init: %s: kprof cpu%d: %d context switches, %d address-space changes:%s\n",
		name, cpu, len(sws), addressSpaceChanges(sws, k.kthr), strings.TrimSuffix(b.String(), ";"))
}

// keysByCount returns m's keys, the largest count first, ties by key.
func keysByCount[V any](m map[string]V, count func(V) int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if ci, cj := count(m[keys[i]]), count(m[keys[j]]); ci != cj {
			return ci > cj
		}
		return keys[i] < keys[j]
	})
	return keys
}

// addressSpaceChanges counts the switches to a user process other than
// the last one the CPU ran: kernel threads and the idle task borrow the
// last address space, so switching to them and back changes nothing.
func addressSpaceChanges(sws []kprofSwitch, kthr map[uint32]bool) int {
	n := 0
	var loaded uint32 // 0: not known yet
	if len(sws) > 0 && sws[0].prev != 0 && !kthr[sws[0].prev] {
		loaded = sws[0].prev
	}
	for _, sw := range sws {
		if sw.next == 0 || kthr[sw.next] || sw.next == loaded {
			continue
		}
		if loaded != 0 {
			n++
		}
		loaded = sw.next
	}
	return n
}

// perfContextMax: call chain entries at or above it mark a context
// (PERF_CONTEXT_KERNEL, _USER, …), not an address.
const perfContextMax = ^uint64(4095 - 1) // (u64)-4095

// readInterrupts reads /proc/interrupts, each row summed over the CPUs
// and named by its label (LOC, RES, CAL, …, or its number and device),
// and /proc/stat's count of context switches (ctxt).
func readInterrupts() map[string]int64 {
	irq, _ := os.ReadFile("/proc/interrupts")
	stat, _ := os.ReadFile("/proc/stat")
	return parseInterrupts(string(irq), string(stat))
}

func parseInterrupts(irq, stat string) map[string]int64 {
	m := map[string]int64{}
	for _, l := range strings.Split(irq, "\n") {
		label, rest, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		label = strings.TrimSpace(label)
		fs := strings.Fields(rest)
		var n int64
		i := 0
		for ; i < len(fs); i++ {
			v, err := strconv.ParseInt(fs[i], 10, 64)
			if err != nil {
				break
			}
			n += v
		}
		if _, err := strconv.Atoi(label); err == nil && i < len(fs) {
			label += "/" + fs[len(fs)-1] // a numbered line: its device
		}
		m[label] = n
	}
	for _, l := range strings.Split(stat, "\n") {
		if v, ok := strings.CutPrefix(l, "ctxt "); ok {
			m["ctxt"], _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return m
}

type kallsyms struct {
	addr []uint64
	name []string
}

// readKallsyms reads the kernel's and its modules' text symbols, sorted.
func readKallsyms() *kallsyms {
	ks := &kallsyms{}
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return ks
	}
	defer f.Close()
	type sym struct {
		a uint64
		n string
	}
	var all []sym
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 || (fs[1] != "t" && fs[1] != "T") {
			continue
		}
		a, err := strconv.ParseUint(fs[0], 16, 64)
		if err != nil || a == 0 {
			continue
		}
		n := fs[2]
		if len(fs) > 3 {
			n += " " + fs[3]
		}
		all = append(all, sym{a, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].a < all[j].a })
	for _, s := range all {
		ks.addr = append(ks.addr, s.a)
		ks.name = append(ks.name, s.n)
	}
	return ks
}

func (ks *kallsyms) lookup(ip uint64) string {
	i := sort.Search(len(ks.addr), func(i int) bool { return ks.addr[i] > ip }) - 1
	if i < 0 {
		return fmt.Sprintf("%#x", ip)
	}
	return ks.name[i]
}
