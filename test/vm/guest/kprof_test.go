//go:build linux

package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// fakeRing lays records out as the kernel does in a perf ring: the
// metadata page, then the data from Data_offset, Data_head bytes of it.
func fakeRing(t *testing.T, recs ...[]byte) []byte {
	t.Helper()
	page := os.Getpagesize()
	ring := make([]byte, 2*page)
	var data []byte
	for _, r := range recs {
		data = append(data, r...)
	}
	copy(ring[page:], data)
	meta := (*unix.PerfEventMmapPage)(unsafe.Pointer(&ring[0]))
	meta.Data_head = uint64(len(data))
	meta.Data_offset = uint64(page)
	meta.Data_size = uint64(page)
	return ring
}

func record(typ uint32, misc uint16, words ...uint64) []byte {
	b := make([]byte, 8, 8+8*len(words))
	binary.LittleEndian.PutUint32(b, typ)
	binary.LittleEndian.PutUint16(b[4:], misc)
	binary.LittleEndian.PutUint16(b[6:], uint16(8+8*len(words)))
	for _, w := range words {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return b
}

func TestKProfParse(t *testing.T) {
	const kctx = ^uint64(127) // PERF_CONTEXT_KERNEL, (u64)-128
	pidTid := func(pid, tid uint32) uint64 { return uint64(pid) | uint64(tid)<<32 }
	comm := record(unix.PERF_RECORD_COMM, 0, pidTid(42, 42), binary.LittleEndian.Uint64([]byte("perf\x00\x00\x00\x00")))
	ring := fakeRing(t,
		record(unix.PERF_RECORD_SAMPLE, unix.PERF_RECORD_MISC_KERNEL, 0xffff0010, pidTid(42, 43), 3, kctx, 0xffff0010, 0xffff0100),
		record(unix.PERF_RECORD_SAMPLE, unix.PERF_RECORD_MISC_USER, 0x401000, pidTid(42, 42), 0),
		comm,
		record(unix.PERF_RECORD_LOST, 0, 7, 5),
		// A record claiming more than the data holds ends the parse.
		[]byte{9, 0, 0, 0, 0, 0, 200, 0},
	)
	k := &kprof{comms: map[uint32]string{}}
	got, _, lost := k.parse(ring)
	want := []kprofSample{
		{pid: 42, kernel: true, chain: []uint64{0xffff0010, 0xffff0100}},
		{pid: 42, chain: []uint64{0x401000}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(kprofSample{})); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	if lost != 5 {
		t.Errorf("lost = %d, want 5", lost)
	}
	if k.comms[42] != "perf" {
		t.Errorf("comm of 42 = %q, want perf", k.comms[42])
	}

	syms := &kallsyms{addr: []uint64{0xffff0000, 0xffff0100}, name: []string{"inner", "outer [mod]"}}
	if got := syms.lookup(0xffff0010); got != "inner" {
		t.Errorf("lookup = %q, want inner", got)
	}
	if got := syms.lookup(0x10); got != "0x10" {
		t.Errorf("lookup below the first symbol = %q, want 0x10", got)
	}
	out := filepath.Join(t.TempDir(), "f")
	if err := k.writeFolded(out, append(got, got[0]), syms, 42); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("perf(client);[user];0x401000 1\nperf(client);outer;inner 2\n", string(b)); diff != "" {
		t.Errorf("folded (-want +got):\n%s", diff)
	}
}

func TestParseInterrupts(t *testing.T) {
	irq := strings.Join([]string{
		"           CPU0       CPU1",
		"  4:        120          3   IO-APIC   4-edge      ttyS0",
		"LOC:       9000       8000   Local timer interrupts",
		"RES:         10          5   Rescheduling interrupts",
		"ERR:          0",
	}, "\n")
	got := parseInterrupts(irq, "cpu  1 2 3\nctxt 12345\nbtime 1\n")
	want := map[string]int64{"4/ttyS0": 123, "LOC": 17000, "RES": 15, "ERR": 0, "ctxt": 12345}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseInterrupts (-want +got):\n%s", diff)
	}
}

func TestKProfSwitches(t *testing.T) {
	pidTid := func(pid, tid uint32) uint64 { return uint64(pid) | uint64(tid)<<32 }
	const out = unix.PERF_RECORD_MISC_SWITCH_OUT
	ring := fakeRing(t,
		// 10 → 20 (out, then in: the in record is not counted again)
		record(unix.PERF_RECORD_SWITCH_CPU_WIDE, out, pidTid(20, 21), pidTid(10, 11)),
		record(unix.PERF_RECORD_SWITCH_CPU_WIDE, 0, pidTid(10, 11), pidTid(20, 21)),
		// a kernel thread (kthreadd's child, from its FORK record) and idle
		record(unix.PERF_RECORD_FORK, 0, pidTid(30, 2), pidTid(30, 2), 0),
		record(unix.PERF_RECORD_SWITCH_CPU_WIDE, out, pidTid(30, 30), pidTid(20, 21)),
		record(unix.PERF_RECORD_SWITCH_CPU_WIDE, out, pidTid(20, 22), pidTid(30, 30)),
		record(unix.PERF_RECORD_SWITCH_CPU_WIDE, out, pidTid(0, 0), pidTid(20, 22)),
		record(unix.PERF_RECORD_SWITCH_CPU_WIDE, out, pidTid(10, 10), pidTid(0, 0)),
	)
	k := &kprof{comms: map[uint32]string{}, kthr: map[uint32]bool{0: true}}
	_, sws, _ := k.parse(ring)
	want := []kprofSwitch{{10, 20}, {20, 30}, {30, 20}, {20, 0}, {0, 10}}
	if diff := cmp.Diff(want, sws, cmp.AllowUnexported(kprofSwitch{})); diff != "" {
		t.Errorf("switches (-want +got):\n%s", diff)
	}
	if !k.kthr[30] {
		t.Error("pid 30, forked by kthreadd, is not taken for a kernel thread")
	}
	// 10 → 20 changes the address space; 20 → kthread → 20 and
	// 20 → idle do not; idle → 10 does.
	if got := addressSpaceChanges(sws, k.kthr); got != 2 {
		t.Errorf("addressSpaceChanges = %d, want 2", got)
	}
}

func TestParseKProbeProfile(t *testing.T) {
	in := "  p0                                                     12345               0\n  p1   0   2\n\n"
	want := map[string]string{"p0": "12345", "p1": "0"}
	if diff := cmp.Diff(want, parseKProbeProfile([]byte(in))); diff != "" {
		t.Errorf("parseKProbeProfile (-want +got):\n%s", diff)
	}
}
