package apisurface

import (
	"errors"
	"flag"
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/api.txt from the sources")

// notGolden are the module's directories, relative to its root, whose
// packages testdata/api.txt leaves out, each with why; a directory below
// one is left out with it. Any directory named internal is left out too
// (importable only from inside the module), and the walk never enters
// testdata. Every other package is golden: its API is what users import.
var notGolden = []struct{ dir, why string }{
	{"uapi", "generated from the kernel's headers and held by genuapi's TestUpToDate; no compatibility promise"},
	{"cmd", "commands: package main exports nothing to import"},
	{"examples", "example programs, not a library"},
	{"test", "test harnesses and suites, not a library"},
}

// excluded reports whether rel is left out of the golden API, and why.
func excluded(rel string) (string, bool) {
	if slices.Contains(strings.Split(rel, "/"), "internal") {
		return "internal", true
	}
	for _, x := range notGolden {
		if rel == x.dir || strings.HasPrefix(rel, x.dir+"/") {
			return x.why, true
		}
	}
	return "", false
}

// goldenDirs lists the directories, relative to root, of the packages
// whose exported API testdata/api.txt holds: every directory of the module
// that holds a package for linux/amd64 and is not excluded. The providers
// are among them and export nothing (TestProvidersExportNothing), so they
// add no line.
func goldenDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	ctx := buildContext("linux", "amd64")
	for _, rel := range packageDirs(t, root) {
		if _, ok := excluded(rel); ok {
			continue
		}
		if _, err := ctx.ImportDir(filepath.Join(root, rel), 0); err != nil {
			var noGo *build.NoGoError
			if errors.As(err, &noGo) {
				continue
			}
			t.Fatalf("%s: %v", rel, err)
		}
		dirs = append(dirs, rel)
	}
	return dirs
}

// TestGoldenCoversEveryPackage fails when a directory of the module holds
// Go source (for any system) and is neither golden nor excluded, when an
// exclusion matches nothing, or when a known public package is missing
// from the golden list.
func TestGoldenCoversEveryPackage(t *testing.T) {
	root := moduleRoot(t)
	golden := goldenDirs(t, root)
	for _, rel := range packageDirs(t, root) {
		if _, ok := excluded(rel); ok || slices.Contains(golden, rel) {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
				t.Errorf("%s holds Go source (%s) but is neither in the golden API nor excluded by notGolden; cover it or exclude it with a reason", rel, n)
				break
			}
		}
	}
	all := packageDirs(t, root)
	for _, x := range notGolden {
		if !slices.Contains(all, x.dir) {
			t.Errorf("notGolden excludes %s, which is not a directory of the module any more", x.dir)
		}
	}
	for _, want := range []string{"cq", "rdmacm", "rdmanet", "uverbs", "provider/mlx5", "provider/rxe"} {
		if !slices.Contains(golden, want) {
			t.Errorf("%s is not in the golden API (found %v)", want, golden)
		}
	}
}

// TestGoldenAPI fails on any exported name of a user's package, or any
// change of its signature, that testdata/api.txt does not list: a change
// of the public API is a deliberate edit of that file (go test
// ./internal/apisurface -run GoldenAPI -update), seen in review.
func TestGoldenAPI(t *testing.T) {
	root := moduleRoot(t)
	var lines []string
	for _, rel := range goldenDirs(t, root) {
		api, _ := surface(t, filepath.Join(root, rel), "linux", "amd64")
		for k, v := range api {
			lines = append(lines, strings.TrimSpace(rel+": "+k+" "+v))
		}
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", "api.txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")); diff != "" {
		t.Errorf("the exported API differs from %s (-listed +now); if the change is meant, rerun with -update and commit the file:\n%s", path, diff)
	}
}
