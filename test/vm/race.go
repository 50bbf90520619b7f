package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"sort"
	"strings"
)

// raceArch reports whether -race can build test binaries for the guest
// architecture arch: the race detector needs cgo, so a C compiler for
// arch, and the host has one for its own architecture only.
func raceArch(arch string) bool { return arch == runtime.GOARCH && runtime.GOOS == "linux" }

// ensureRaceTools installs gcc for the race build when it is missing.
func ensureRaceTools(ctx context.Context) error {
	if _, err := exec.LookPath("gcc"); err == nil {
		return nil
	}
	logf("installing gcc with apt-get (the race detector needs cgo for the test binaries)")
	return asRootEnv(ctx, []string{"install", "-y", "-qq", "gcc", "libc6-dev"})
}

// hostLibs returns the shared objects the host's dynamic loader maps for
// the binaries (ldd's list: the loader, libc, and whatever else), by
// their host paths. The guest gets these very files at the same paths,
// so a race-built test binary runs there on the libc it was linked
// against, loader and libc from one build.
func hostLibs(ctx context.Context, bins []string) ([]string, error) {
	seen := map[string]bool{}
	for _, b := range bins {
		out, err := exec.CommandContext(ctx, "ldd", b).Output()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", b, err)
		}
		for _, p := range parseLdd(string(out)) {
			seen[p] = true
		}
	}
	libs := make([]string, 0, len(seen))
	for p := range seen {
		libs = append(libs, p)
	}
	sort.Strings(libs)
	return libs, nil
}

// parseLdd picks the file paths out of ldd's output: "libc.so.6 =>
// /lib/x86_64-linux-gnu/libc.so.6 (0x…)" and "/lib64/ld-linux-x86-64.so.2
// (0x…)"; the vDSO has no file.
func parseLdd(out string) []string {
	var paths []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(l, "=>"); ok {
			l = strings.TrimSpace(after)
		}
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			paths = append(paths, f[0])
		}
	}
	return paths
}
