// Package testutil holds the helpers goverbs' tests share: above all the
// rule for tests that need an RDMA device. Inside the VM harness (whose
// /init sets GOVERBS_IN_VM=1) a missing device is a failure; anywhere
// else the test skips and names the command that runs it for real.
package testutil

import (
	"os"
	"testing"
	"time"
)

// EnvInVM is set to "1" by the VM harness's /init for every test binary.
const EnvInVM = "GOVERBS_IN_VM"

// InVM reports whether the test runs inside the VM harness.
func InVM() bool { return os.Getenv(EnvInVM) == "1" }

// DevicePath is the uverbs character device the harness creates (rxe0).
const DevicePath = "/dev/infiniband/uverbs0"

// RequireDevice makes sure the uverbs device path exists: outside the VM it
// skips the test, inside it fails.
func RequireDevice(tb testing.TB, path string) {
	tb.Helper()
	_, err := os.Stat(path)
	if err == nil {
		return
	}
	if InVM() {
		tb.Fatalf("no RDMA device inside the VM harness: %v", err)
	}
	tb.Skipf("no RDMA device (%v); run it on soft-RoCE in a VM: make vmtest RUN='^%s$'", err, tb.Name())
}

// OpenFDs returns how many file descriptors the process has open.
func OpenFDs(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatalf("counting fds: %v", err)
	}
	return len(ents)
}

// FDsTo returns how many of the process's file descriptors are open on
// target, as /proc/self/fd's links name it ("/dev/infiniband/rdma_cm",
// "anon_inode:[eventpoll]").
func FDsTo(tb testing.TB, target string) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatalf("counting fds: %v", err)
	}
	n := 0
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l == target {
			n++
		}
	}
	return n
}

// CheckFDLeak fails the test if it ends with more fds open than it began.
func CheckFDLeak(tb testing.TB) {
	tb.Helper()
	before := OpenFDs(tb)
	tb.Cleanup(func() {
		if after := OpenFDs(tb); after > before {
			tb.Errorf("fd leak: %d fds open before the test, %d after", before, after)
		}
	})
}

// WaitUntil calls cond every few milliseconds until it returns true or
// limit passes, and reports whether it returned true. It is for what
// settles a little after the call that caused it: a peer's Close seen at
// the DREQ, a goroutine's exit, a kernel object freed.
func WaitUntil(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); ; time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
