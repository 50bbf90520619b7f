package mutex

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestHotPathsInline checks, for linux/amd64, that the lock's fast paths
// are inlined where the poll uses them: Lock, TryLock and Unlock (Grab,
// which RingLock.TryLock calls, is one compare-and-swap), the CQ's
// RingLock around them, and both in rxe's PollRing. Unlock sits one
// point under the inliner's budget inside RingLock.Unlock; a change that
// tips it over costs a call per consuming poll and no test would fail
// otherwise. It needs the go command and the source tree, so it skips in
// the VM harness.
func TestHotPathsInline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build; skipped with -short")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skipf("no source tree: %v", err)
	}
	cmd := exec.Command(goCmd, "build", "-gcflags=-m", "./internal/mutex", "./cq", "./provider/rxe")
	cmd.Dir = root
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOOS=") || strings.HasPrefix(kv, "GOARCH=") || strings.HasPrefix(kv, "GOFLAGS=")
	}), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	// Each want is a file (or "" for any) and the end of a line of the
	// compiler's report, such as "provider/rxe/cq_linux.go:105:13:
	// inlining call to cq.(*RingLock).Unlock".
	for _, want := range [][2]string{
		{"internal/mutex/mutex.go", "can inline (*Mutex).Lock"},
		{"internal/mutex/mutex.go", "can inline (*Mutex).TryLock"},
		{"internal/mutex/mutex.go", "can inline (*Mutex).Unlock"},
		{"cq/cq.go", "can inline (*RingLock).TryLock"},
		{"cq/cq.go", "can inline (*RingLock).Single"},
		{"provider/rxe/cq_linux.go", "inlining call to cq.(*RingLock).TryLock"},
		{"cq/cq.go", "can inline (*RingLock).Unlock"},
		{"provider/rxe/cq_linux.go", "inlining call to cq.(*RingLock).Unlock"},
		{"provider/rxe/cq_linux.go", "inlining call to mutex.(*Mutex).Unlock"},
	} {
		if !slices.ContainsFunc(lines, func(l string) bool {
			return strings.Contains(l, want[0]+":") && strings.HasSuffix(strings.TrimSpace(l), ": "+want[1])
		}) {
			t.Errorf("go build -gcflags=-m reports no %s: %s", want[0], want[1])
		}
	}
}
