package apisurface

import (
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is goverbs' module path.
const module = "github.com/goverbs/goverbs"

// layers is the package graph of docs/ARCHITECTURE.md: for each library
// package, the goverbs packages it may import (its Linux build, tests
// left out). Every arrow points down, so there is no cycle, cq never needs
// a provider and a provider never needs uverbs. A package not listed here
// (the tools, the test suites, the harness) may import any of them.
var layers = map[string][]string{
	"uapi":               {},
	"internal/errs":      {},
	"internal/release":   {},
	"internal/fdturn":    {},
	"internal/cqseam":    {},
	"internal/transport": {"uapi"},
	"internal/netlink":   {"uapi"},
	"internal/kverbs":    {"internal/errs", "internal/transport", "uapi"},
	"internal/ucma":      {"internal/errs", "internal/netlink", "uapi"},
	"internal/devhook":   {"internal/transport"},
	"cq":                 {"internal/cqseam", "internal/errs", "internal/fdturn"},
	"internal/provider":  {"cq", "internal/cqseam", "internal/kverbs", "internal/transport", "uapi"},
	"provider/rxe": {"cq", "internal/cqseam", "internal/errs", "internal/kverbs", "internal/provider",
		"internal/release", "internal/transport", "uapi"},
	"provider/mlx5": {"cq", "internal/cqseam", "internal/errs", "internal/kverbs", "internal/provider",
		"internal/release", "internal/transport", "uapi"},
	"uverbs": {"cq", "internal/cqseam", "internal/devhook", "internal/errs", "internal/fdturn",
		"internal/kverbs", "internal/netlink", "internal/provider", "internal/transport", "provider/mlx5",
		"provider/rxe", "uapi"},
	"internal/mlx5model": {"internal/transport", "uapi"},
	"rdmacm": {"cq", "internal/errs", "internal/fdturn", "internal/netlink", "internal/ucma", "uapi",
		"uverbs"},
	"rdmanet": {"cq", "rdmacm", "uverbs"},
}

// examplesMayImport is what the programs in examples/ may import of
// goverbs (their tests may use the test helpers too).
var examplesMayImport = []string{"cq", "rdmanet", "uverbs"}

// deps are the modules outside the standard library that goverbs may
// import: x/sys everywhere, go-cmp and x/net's nettest in tests only
// (README: dependencies).
var (
	libraryDeps = []string{"golang.org/x/sys/"}
	testDeps    = []string{"golang.org/x/sys/", "github.com/google/go-cmp/", "golang.org/x/net/nettest"}
)

// TestLayers holds every package to the documented package graph and the
// dependency rule, on each system and architecture goverbs builds for,
// and finds no cgo (the Makefile's grep finds `import "C"` too; this also
// sees a file that go/build would compile as cgo).
func TestLayers(t *testing.T) {
	root := moduleRoot(t)
	dirs := packageDirs(t, root)
	seen := map[string]bool{}
	said := map[string]bool{} // each finding once, not once per target
	errorf := func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !said[msg] {
			said[msg] = true
			t.Error(msg)
		}
	}
	for _, tg := range targets {
		ctx := build.Default
		ctx.GOOS, ctx.GOARCH, ctx.CgoEnabled = tg.goos, tg.goarch, true
		for _, rel := range dirs {
			p, err := ctx.ImportDir(filepath.Join(root, rel), 0)
			if _, ok := err.(*build.NoGoError); ok {
				continue
			} else if err != nil {
				t.Errorf("%s on %s/%s: %v", rel, tg.goos, tg.goarch, err)
				continue
			}
			seen[rel] = true
			if len(p.CgoFiles) > 0 {
				t.Errorf("%s on %s/%s: cgo in %v; goverbs has none", rel, tg.goos, tg.goarch, p.CgoFiles)
			}
			allowed, layered := layers[rel]
			if strings.HasPrefix(rel, "examples/") { // programs a user could write: the public API only
				allowed, layered = examplesMayImport, true
			}
			for _, imp := range p.Imports {
				checkImport(errorf, rel, imp, allowed, layered, libraryDeps)
			}
			for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
				checkImport(errorf, rel, imp, nil, false, testDeps)
			}
		}
	}
	for rel := range layers {
		if !seen[rel] {
			t.Errorf("layers names %s, which holds no package: keep the table (and docs/ARCHITECTURE.md) current", rel)
		}
	}
}

// checkImport reports through errorf what is wrong with package rel
// importing imp: a goverbs package outside allowed (when layered), a
// module outside deps, or cgo.
func checkImport(errorf func(string, ...any), rel, imp string, allowed []string, layered bool, deps []string) {
	if imp == "C" {
		errorf("%s imports \"C\"; goverbs has no cgo", rel)
		return
	}
	if own, ok := strings.CutPrefix(imp, module+"/"); ok {
		if layered && !slices.Contains(allowed, own) {
			errorf("%s imports %s, which docs/ARCHITECTURE.md's package graph does not allow (allowed: %v)", rel, own, allowed)
		}
		return
	}
	first, _, _ := strings.Cut(imp, "/")
	if !strings.Contains(first, ".") {
		return // the standard library
	}
	for _, d := range deps {
		if strings.HasPrefix(imp+"/", d) {
			return
		}
	}
	errorf("%s imports %s: goverbs depends on %v only (a new dependency needs its reason in docs/)", rel, imp, deps)
}

// packageDirs lists the module's directories, relative to root, that may
// hold a package: testdata and hidden directories left out.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		dirs = append(dirs, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// TestLayersCatchesUpwardImport proves the check can fail: an upward
// import (cq importing a provider), a module outside the dependencies,
// and cgo each fail; x/sys and the standard library pass.
func TestLayersCatchesUpwardImport(t *testing.T) {
	var got []string
	errorf := func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }
	for _, imp := range []string{module + "/provider/rxe", "github.com/example/dep", "C", "golang.org/x/sys/unix", "sync/atomic", module + "/internal/errs"} {
		checkImport(errorf, "cq", imp, layers["cq"], true, libraryDeps)
	}
	if len(got) != 3 {
		t.Errorf("want three failures (provider/rxe, the foreign module, cgo), got %d: %q", len(got), got)
	}
	got = nil
	checkImport(errorf, "cq", "github.com/google/go-cmp/cmp", nil, false, testDeps)
	if len(got) != 0 {
		t.Errorf("go-cmp in a test: %q", got)
	}
}
