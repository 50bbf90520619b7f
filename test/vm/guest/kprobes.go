//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Counted kernel functions: a kprobe on each (tracefs's kprobe_events),
// whose hit count kprobe_profile keeps, read after the step. The counts
// are exact, where a sampled profile's are not: for telling which kernel
// calls one program's step makes more often than another's doing the
// same work. They count every process's calls, the step's and the rest.

const tracefs = "/sys/kernel/tracing"

// kprobeGroup names goverbs' probes in kprobe_events.
const kprobeGroup = "gvcount"

type kprobes struct {
	syms []string
	ok   []bool
}

// startKProbes places and enables one kprobe per function. A function
// that cannot be probed (not in the kernel, inlined, notrace) is
// reported and left out.
func startKProbes(syms []string) (*kprobes, error) {
	if err := mountTracefs(); err != nil {
		return nil, err
	}
	k := &kprobes{syms: syms, ok: make([]bool, len(syms))}
	k.clear()
	for i, s := range syms {
		if err := appendFile(tracefs+"/kprobe_events", fmt.Sprintf("p:%s/p%d %s\n", kprobeGroup, i, s)); err != nil {
			fmt.Printf("init: kprobe on %s: %v\n", s, err)
			continue
		}
		if err := os.WriteFile(fmt.Sprintf("%s/events/%s/p%d/enable", tracefs, kprobeGroup, i), []byte("1"), 0); err != nil {
			fmt.Printf("init: enable kprobe on %s: %v\n", s, err)
			continue
		}
		k.ok[i] = true
	}
	return k, nil
}

// stop disables the probes, prints their hit counts and removes them.
func (k *kprobes) stop(name string) {
	for i, ok := range k.ok {
		if ok {
			_ = os.WriteFile(fmt.Sprintf("%s/events/%s/p%d/enable", tracefs, kprobeGroup, i), []byte("0"), 0)
		}
	}
	b, err := os.ReadFile(tracefs + "/kprobe_profile")
	if err != nil {
		fmt.Printf("init: %s: kprobe_profile: %v\n", name, err)
	}
	hits := parseKProbeProfile(b)
	for i, s := range k.syms {
		if k.ok[i] {
			fmt.Printf("init: %s: kprobe %s hits %s\n", name, s, hits[fmt.Sprintf("p%d", i)])
		}
	}
	k.clear()
}

// parseKProbeProfile reads kprobe_profile: a line a probe, "  p0   12345
// 0", its event (without its group), its hits and its misses.
func parseKProbeProfile(b []byte) map[string]string {
	hits := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			hits[f[0]] = f[1]
		}
	}
	return hits
}

// mountTracefs mounts tracefs where the kprobes and the traces find it,
// unless it is there already.
func mountTracefs() error {
	if err := os.MkdirAll(tracefs, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tracefs", tracefs, "tracefs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mount tracefs: %w", err)
	}
	return nil
}

// clear removes every kprobe (a truncating write to kprobe_events; the
// probes must be disabled): the guest places none but these.
func (k *kprobes) clear() {
	if err := os.WriteFile(tracefs+"/kprobe_events", nil, 0); err != nil {
		fmt.Printf("init: clear kprobes: %v\n", err)
	}
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
