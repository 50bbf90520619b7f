package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// goCmd runs the go tool in the module root for the guest's architecture,
// always with CGO_ENABLED=0: every VM run also proves that goverbs builds
// static and cross-compiles.
func goCmd(ctx context.Context, root, arch string, args ...string) (string, error) {
	return goCmdCgo(ctx, root, arch, false, args...)
}

// goCmdCgo is goCmd, with CGO_ENABLED=1 if cgo is set: for race-detector
// test binaries only, never for the library, the tool or /init.
func goCmdCgo(ctx context.Context, root, arch string, cgo bool, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	enabled := "CGO_ENABLED=0"
	if cgo {
		enabled = "CGO_ENABLED=1"
	}
	// -trimpath keeps the checkout's directory out of the binaries, and so
	// out of the build cache's keys: a second clone of the same commit
	// builds nothing again.
	cmd.Env = append(os.Environ(), enabled, "GOOS=linux", "GOARCH="+arch,
		strings.TrimSpace("GOFLAGS=-trimpath "+os.Getenv("GOFLAGS")))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s GOARCH=%s go %s: %w\n%s", enabled, arch, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// testBin is one package's test binary, built for the guest.
type testBin struct {
	Pkg  string // import path
	Rel  string // directory relative to the module root ("uverbs")
	Host string // the binary on the host
	Data string // the package's testdata directory on the host, or ""
}

// GuestPath is where the binary lies in the guest.
func (t testBin) GuestPath() string { return "/tests/" + t.Name() + ".test" }

// GuestDir is the directory the binary runs in, holding testdata/.
func (t testBin) GuestDir() string { return "/tests/" + t.Rel }

// Name is the flattened package path, "provider_rxe".
func (t testBin) Name() string {
	if t.Rel == "." || t.Rel == "" {
		return "goverbs"
	}
	return strings.ReplaceAll(t.Rel, "/", "_")
}

// buildTests builds a test binary for every package matched by patterns
// that has tests, except the harness's own packages (they need the host).
// With race, the binaries have the race detector (and so cgo).
func buildTests(ctx context.Context, root, arch, out string, patterns []string, race bool) ([]testBin, error) {
	list, err := goCmd(ctx, root, arch, append([]string{"list", "-f",
		"{{.ImportPath}}\t{{.Dir}}\t{{len .TestGoFiles}}\t{{len .XTestGoFiles}}"}, patterns...)...)
	if err != nil {
		return nil, err
	}
	var bins []testBin
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 || (f[2] == "0" && f[3] == "0") {
			continue
		}
		rel, err := filepath.Rel(root, f[1])
		if err != nil {
			return nil, err
		}
		rel = filepath.ToSlash(rel)
		if rel == "test/vm" || strings.HasPrefix(rel, "test/vm/") {
			continue
		}
		if race && modelPackage(rel) && wholeSuite() {
			logf("%s: not under -race in the VM: make model runs it with the race detector on the host", f[0])
			continue
		}
		b := testBin{Pkg: f[0], Rel: rel}
		b.Host = filepath.Join(out, b.Name()+".test")
		if st, err := os.Stat(filepath.Join(f[1], "testdata")); err == nil && st.IsDir() {
			b.Data = filepath.Join(f[1], "testdata")
		}
		bins = append(bins, b)
	}
	// One go test -c builds many packages' binaries side by side, on every
	// core, into a directory, naming each by its package's last element; a
	// batch holds packages whose last elements differ, and each binary is
	// then moved to its flattened name.
	args := []string{"test", "-c"}
	if !noCheckptr {
		args = append(args, "-gcflags=all=-d=checkptr")
	}
	if race {
		args = append(args, "-race")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	for _, batch := range batchByBase(bins) {
		tmp, err := os.MkdirTemp(out, "batch")
		if err != nil {
			return nil, err
		}
		a := append(slices.Clip(args), "-o", tmp+string(filepath.Separator))
		for _, b := range batch {
			a = append(a, b.Pkg)
		}
		if _, err := goCmdCgo(ctx, root, arch, race, a...); err != nil {
			return nil, err
		}
		for _, b := range batch {
			if err := os.Rename(filepath.Join(tmp, path.Base(b.Pkg)+".test"), b.Host); err != nil {
				return nil, err
			}
		}
		if err := os.Remove(tmp); err != nil {
			return nil, err
		}
	}
	return bins, nil
}

// batchByBase splits bins into batches in which no two packages share a
// last path element, keeping their order.
func batchByBase(bins []testBin) [][]testBin {
	var batches [][]testBin
	var seen []map[string]bool
	for _, b := range bins {
		base := path.Base(b.Pkg)
		i := 0
		for i < len(batches) && seen[i][base] {
			i++
		}
		if i == len(batches) {
			batches = append(batches, nil)
			seen = append(seen, map[string]bool{})
		}
		batches[i] = append(batches[i], b)
		seen[i][base] = true
	}
	return batches
}

// modelPackage reports whether the package at rel (from the module's
// root) tests the mlx5 provider on its in-process device model. Such a
// package never opens the kernel's devices, so the kernel under it does
// not matter: the VM suite runs it on the first kernel of each
// architecture the host does not run natively (for arm64 the VM is the
// one place its code runs; make unit and make model run it on the host),
// and not under -race, since make model runs it with the race detector on
// the host. A -pkg that names packages runs them wherever it is asked.
func modelPackage(rel string) bool {
	return rel == "internal/mlx5model" || rel == "provider/mlx5"
}

// archPackages are what a guest of an -archset architecture runs: every
// package with code, layouts or memory ordering of its own on an
// architecture, and the tests that prove them against the kernel there.
// Below uverbs, the architecture shows: struct layouts (uapi), the system
// call ABI (transport, kverbs), the release stores that publish ring
// indices (internal/release: a plain store on x86, an atomic one on arm64),
// rxe's rings read under arm64's weaker ordering (provider/rxe, cq,
// uverbs, the man pages' CQ rules in test/conformance), mlx5's assembly
// (provider/mlx5 and its model), and the tool's cycle counter in assembly
// with its interop against rdma-core's own binaries for the architecture
// (cmd/goverbs). Above them (rdmacm, rdmanet, the examples, the fault
// tests) the code is the same Go on every architecture, proven by the
// amd64 guests and by the race detector; make vmfull runs those on arm64
// too.
var archPackages = []string{
	"./uapi/", "./internal/transport/", "./internal/kverbs/", "./internal/release/",
	"./provider/...", "./internal/mlx5model/", "./cq/", "./uverbs/", "./test/conformance/", "./cmd/goverbs/",
}

// wholeSuite reports whether -pkg is its default, every package, rather
// than packages someone named.
func wholeSuite() bool { return *flagPkg == "./..." }

// moduleRoot finds the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the goverbs module: run from the repository")
	}
	return filepath.Dir(mod), nil
}
