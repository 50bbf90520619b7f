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
// one is left out with it. Left out besides: any directory named internal
// (importable only from inside the module), testdata and hidden
// directories (the walk never enters them), and test-only packages (no
// non-test Go file). Every other package is public, and golden: its API
// is what users import, each line a promise.
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

// coverage walks the module at root. golden lists the directories,
// relative to root, of the packages whose exported API testdata/api.txt
// holds: each that is not excluded and has a non-test Go file for
// linux/amd64 (the providers among them, though they export nothing:
// TestProvidersExportNothing). uncovered lists the directories that hold
// a non-test Go file (for any system) and are neither golden nor
// excluded: a package for other systems only, say.
func coverage(t *testing.T, root string) (golden, uncovered []string) {
	t.Helper()
	ctx := buildContext("linux", "amd64")
	for _, rel := range packageDirs(t, root) {
		if _, ok := excluded(rel); ok {
			continue
		}
		pkg, err := ctx.ImportDir(filepath.Join(root, rel), 0)
		var noGo *build.NoGoError
		switch {
		case err == nil && len(pkg.GoFiles) != 0:
			golden = append(golden, rel)
			continue
		case err != nil && !errors.As(err, &noGo):
			t.Fatalf("%s: %v", rel, err)
		}
		entries, err := os.ReadDir(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
				uncovered = append(uncovered, rel)
				break
			}
		}
	}
	return golden, uncovered
}

// goldenDirs is coverage's golden list.
func goldenDirs(t *testing.T, root string) []string {
	t.Helper()
	golden, _ := coverage(t, root)
	return golden
}

// TestGoldenCoversEveryPackage fails when a directory of the module holds
// a package (for any system) that is neither golden nor excluded by
// notGolden, when an exclusion matches no directory, or when a package
// users import is missing from the golden list.
func TestGoldenCoversEveryPackage(t *testing.T) {
	root := moduleRoot(t)
	golden, uncovered := coverage(t, root)
	for _, rel := range uncovered {
		t.Errorf("%s holds a package that is neither in the golden API (no Go file for linux/amd64) nor excluded by notGolden; cover it or exclude it with a reason", rel)
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

// TestCoverageSeesUncovered proves the walk can fail: in a module of its
// own, a package for darwin only is uncovered; internal, testdata,
// test-only, excluded and Go-less directories are neither golden nor
// uncovered; a plain package is golden.
func TestCoverageSeesUncovered(t *testing.T) {
	root := t.TempDir()
	write := func(name, src string) {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.24\n")
	write("lib/lib.go", "package lib\n")
	write("lib/sub/sub_linux.go", "package sub\n")
	write("mac/mac_darwin.go", "package mac\n")
	write("lib/internal/x/x.go", "package x\n")
	write("lib/testdata/t.go", "package t\n")
	write("testsonly/a_test.go", "package testsonly\n")
	write("uapi/u.go", "package uapi\n")
	write("cmd/c/main.go", "package main\n")
	write("docs/README.md", "docs\n")
	golden, uncovered := coverage(t, root)
	if want := []string{"lib", "lib/sub"}; !slices.Equal(golden, want) {
		t.Errorf("golden %v, want %v", golden, want)
	}
	if want := []string{"mac"}; !slices.Equal(uncovered, want) {
		t.Errorf("uncovered %v, want %v", uncovered, want)
	}
}

// TestGoldenAPI fails on any exported name of a user's package, or any
// change of its signature, that testdata/api.txt does not list: a change
// of the public API is a deliberate edit of that file (go test
// ./internal/apisurface -run GoldenAPI -update), seen in review.
func TestGoldenAPI(t *testing.T) {
	root := moduleRoot(t)
	dirs := goldenDirs(t, root)
	slices.Sort(dirs)
	var lines []string
	for _, rel := range dirs {
		// Each package opens with a line of its own, so that one
		// exporting nothing (a provider) is seen to be covered.
		lines = append(lines, rel+": package")
		api, _ := surface(t, filepath.Join(root, rel), "linux", "amd64")
		var names []string
		for k, v := range api {
			names = append(names, strings.TrimSpace(rel+": "+k+" "+v))
		}
		slices.Sort(names)
		lines = append(lines, names...)
	}
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
