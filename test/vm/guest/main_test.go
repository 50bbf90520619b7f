//go:build linux

package main

import (
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStartOn: a step with CPUs runs only on them, and /init's thread
// gets its own mask back.
func TestStartOn(t *testing.T) {
	var mine unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mine); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for c := 0; c < 1024 && cpu < 0; c++ {
		if mine.IsSet(c) {
			cpu = c
		}
	}
	for _, tc := range []struct {
		cpus []int
		want string
	}{
		{[]int{cpu}, "Cpus_allowed_list:\t" + strconv.Itoa(cpu)},
		{nil, ""}, // the parent's mask, whatever it is
	} {
		var out bytes.Buffer
		cmd := exec.Command("grep", "Cpus_allowed_list", "/proc/self/status")
		cmd.Stdout = &out
		if err := startOn(cmd, tc.cpus); err != nil {
			t.Fatalf("startOn %v: %v", tc.cpus, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		if got := strings.TrimSpace(out.String()); tc.want != "" && got != tc.want {
			t.Errorf("startOn %v: the child has %q, want %q", tc.cpus, got, tc.want)
		}
		var now unix.CPUSet
		if err := unix.SchedGetaffinity(0, &now); err != nil {
			t.Fatal(err)
		}
		if now != mine {
			t.Errorf("startOn %v: the caller's mask is now %v, was %v", tc.cpus, now, mine)
		}
	}
}

// TestTick: /init tick wakes over the duration and refuses arguments it
// cannot read.
func TestTick(t *testing.T) {
	if rc := tick("2ms", "50ms"); rc != 0 {
		t.Errorf("tick 2ms 50ms: rc %d", rc)
	}
	for _, args := range [][2]string{{"x", "1s"}, {"1ms", "y"}, {"0s", "1s"}} {
		if rc := tick(args[0], args[1]); rc != 2 {
			t.Errorf("tick %q %q: rc %d, want 2", args[0], args[1], rc)
		}
	}
}
