package apisurface

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// stubPackages are the packages whose !linux stubs TestStubsRun runs.
var stubPackages = []string{"uverbs", "cq", "rdmacm", "internal/errs", "cmd/goverbs"}

// TestStubsRun runs the darwin/windows stubs and their tests
// (unsupported_other_test.go and the rest) here, on Linux: go test with an
// -overlay that hides each Linux-only file of stubPackages and shows each
// !linux file without its build line, so that the code a darwin or
// windows program gets is what runs. It needs the go command and the
// source tree, so it skips in the VM harness.
func TestStubsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test; skipped with -short")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root := moduleRoot(t)
	tmp := t.TempDir()
	replace := map[string]string{}
	buildLine := regexp.MustCompile(`(?m)^//go:build !linux\n`)
	for _, rel := range stubPackages {
		dir := filepath.Join(root, rel)
		linux := goFiles(t, dir, "linux")
		other := goFiles(t, dir, "darwin")
		for _, f := range linux {
			if !slices.Contains(other, f) {
				replace[filepath.Join(dir, f)] = "" // hidden
			}
		}
		for _, f := range other {
			if slices.Contains(linux, f) {
				continue
			}
			src, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if !buildLine.Match(src) {
				t.Fatalf("%s/%s: a non-Linux file without the line //go:build !linux", rel, f)
			}
			// A name without the _other suffix, which would exclude it.
			name := "stubrun_" + regexp.MustCompile(`_other(_test)?\.go$`).ReplaceAllString(f, "$1.go")
			shown := filepath.Join(tmp, filepath.Base(dir)+"_"+name)
			if err := os.WriteFile(shown, buildLine.ReplaceAll(src, nil), 0o644); err != nil {
				t.Fatal(err)
			}
			replace[filepath.Join(dir, f)] = ""
			replace[filepath.Join(dir, name)] = shown
		}
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"test", "-count=1", "-overlay=" + ov}
	for _, rel := range stubPackages {
		args = append(args, "./"+rel)
	}
	cmd := exec.Command(goCmd, args...)
	cmd.Dir = root
	// The host's own GOOS and GOARCH: this test may itself run as another
	// GOARCH (GOARCH=s390x go test -exec qemu-s390x-static ./...).
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "GOOS=") || strings.HasPrefix(kv, "GOARCH=")
	}), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
	t.Logf("the stubs, run on linux:\n%s", out)
}

// goFiles lists the package's Go files, tests included, for goos.
func goFiles(t *testing.T, dir, goos string) []string {
	t.Helper()
	ctx := buildContext(goos, "amd64")
	pkg, err := ctx.ImportDir(dir, 0)
	if err != nil {
		t.Fatalf("%s for %s: %v", dir, goos, err)
	}
	return slices.Concat(pkg.GoFiles, pkg.TestGoFiles, pkg.XTestGoFiles)
}
