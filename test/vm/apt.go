package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// apt fetches Debian packages with apt-get download into a cache outside
// the repository, and runs apt-get update at most once per run when the
// package lists look stale (a name that apt cannot find, or a download
// that fails because the archive moved on).
type apt struct {
	debs    string // cache of downloaded .deb files
	updated bool
	archs   map[string]bool // architectures ensureArch found apt able to fetch
}

func newApt(cache string) (*apt, error) {
	debs := filepath.Join(cache, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return nil, err
	}
	return &apt{debs: debs}, nil
}

// debArch maps GOARCH to Debian's architecture name.
func debArch(goarch string) string {
	switch goarch {
	case "386":
		return "i386"
	case "arm":
		return "armhf"
	}
	return goarch
}

// update runs apt-get update once, first adding arch as a foreign
// architecture if dpkg does not know it yet.
func (a *apt) update(ctx context.Context) error {
	if a.updated {
		return nil
	}
	a.updated = true
	logf("apt: updating the package lists")
	return asRoot(ctx, "apt-get", "update", "-qq")
}

// ensureArch makes apt able to download packages of arch: on a machine
// that has never fetched arm64 packages, dpkg must first be told of the
// architecture and the lists updated. Once per architecture and run.
func (a *apt) ensureArch(ctx context.Context, arch string) error {
	if a.archs[arch] || arch == "all" {
		return nil
	}
	if err := a.ensureArch1(ctx, arch); err != nil {
		return err
	}
	if a.archs == nil {
		a.archs = map[string]bool{}
	}
	a.archs[arch] = true
	return nil
}

func (a *apt) ensureArch1(ctx context.Context, arch string) error {
	native, err := output(ctx, "dpkg", "--print-architecture")
	if err != nil {
		return err
	}
	if strings.TrimSpace(native) == arch {
		return nil
	}
	foreign, err := output(ctx, "dpkg", "--print-foreign-architectures")
	if err != nil {
		return err
	}
	for _, f := range strings.Fields(foreign) {
		if f == arch {
			return nil
		}
	}
	logf("apt: adding architecture %s", arch)
	if err := asRoot(ctx, "dpkg", "--add-architecture", arch); err != nil {
		return err
	}
	a.updated = false
	return a.update(ctx)
}

// pkgInfo is what apt-cache show says of a package's candidate version.
type pkgInfo struct {
	Name, Version, Arch string
	Depends             []string // names only, alternatives flattened
	reqArch             string   // the architecture asked for ("all" packages say "all" in Arch)
}

func (p pkgInfo) debFile() string {
	return fmt.Sprintf("%s_%s_%s.deb", p.Name, strings.ReplaceAll(p.Version, ":", "%3a"), p.Arch)
}

// show returns the candidate version of name:arch, updating the lists
// once if apt does not know it.
func (a *apt) show(ctx context.Context, name, arch string) (pkgInfo, error) {
	infos, err := a.showAll(ctx, []string{name}, arch)
	if err != nil {
		return pkgInfo{}, err
	}
	return infos[0], nil
}

// showAll returns the candidate versions of names (all of arch), in their
// order, from one apt-cache call: apt loads its lists, which takes a
// second or two of CPU, once for all of them. It updates the lists once
// if apt does not know one.
func (a *apt) showAll(ctx context.Context, names []string, arch string) ([]pkgInfo, error) {
	if err := a.ensureArch(ctx, arch); err != nil {
		return nil, fmt.Errorf("apt-cache show %s (%s): %w", strings.Join(names, " "), arch, err)
	}
	infos, err := a.showAll1(ctx, names, arch)
	if err != nil && !a.updated {
		if uerr := a.update(ctx); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
		infos, err = a.showAll1(ctx, names, arch)
	}
	return infos, err
}

func (a *apt) showAll1(ctx context.Context, names []string, arch string) ([]pkgInfo, error) {
	args := []string{"show", "--no-all-versions"}
	for _, n := range names {
		args = append(args, n+":"+arch)
	}
	what := fmt.Sprintf("apt-cache show %s (%s)", strings.Join(names, " "), arch)
	out, err := output(ctx, "apt-cache", args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	found := map[string]pkgInfo{}
	for _, rec := range strings.Split(out, "\n\n") {
		info := parseRecord(rec)
		info.reqArch = arch
		if _, dup := found[info.Name]; info.Name != "" && info.Version != "" && !dup {
			found[info.Name] = info
		}
	}
	infos := make([]pkgInfo, len(names))
	for i, n := range names {
		info, ok := found[n]
		if !ok {
			return nil, fmt.Errorf("%s: no candidate version of %s", what, n)
		}
		infos[i] = info
	}
	return infos, nil
}

// parseRecord reads one package's record of apt-cache show.
func parseRecord(rec string) pkgInfo {
	var info pkgInfo
	for _, line := range strings.Split(rec, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case "Package":
			info.Name = v
		case "Version":
			info.Version = v
		case "Architecture":
			info.Arch = v
		case "Depends", "Pre-Depends":
			for _, d := range strings.Split(v, ",") {
				for _, alt := range strings.Split(d, "|") {
					f := strings.Fields(alt)
					if len(f) > 0 {
						n, _, _ := strings.Cut(f[0], ":")
						info.Depends = append(info.Depends, n)
					}
				}
			}
		}
	}
	return info
}

// download returns the cached .deb of p, fetching it if needed.
func (a *apt) download(ctx context.Context, p pkgInfo) (string, error) {
	debs, err := a.downloadAll(ctx, []pkgInfo{p})
	if err != nil {
		return "", err
	}
	return debs[0], nil
}

// downloadAll returns the cached .deb files of pkgs, in their order,
// fetching the missing ones with one apt-get call.
func (a *apt) downloadAll(ctx context.Context, pkgs []pkgInfo) ([]string, error) {
	debs := make([]string, len(pkgs))
	var specs []string
	for i, p := range pkgs {
		debs[i] = filepath.Join(a.debs, p.debFile())
		if _, err := os.Stat(debs[i]); err == nil {
			continue
		}
		logf("apt: downloading %s %s (%s)", p.Name, p.Version, p.Arch)
		specs = append(specs, p.Name+":"+p.reqArch+"="+p.Version)
	}
	if len(specs) == 0 {
		return debs, nil
	}
	what := "apt-get download " + strings.Join(specs, " ")
	args := append([]string{"download", "-qq", "-o", "APT::Sandbox::User=root"}, specs...)
	if err := run(ctx, a.debs, "apt-get", args...); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for _, d := range debs {
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("%s: %s not written", what, d)
		}
	}
	return debs, nil
}

// kernelPattern matches the package names of one kernel series, with the
// build number as the first group. Debian's security archive moves the
// number on, so it is resolved, never hard-coded.
func kernelPattern(series, arch string) (*regexp.Regexp, string, error) {
	switch series {
	case "6.1":
		return regexp.MustCompile(`^linux-image-6\.1\.0-(\d+)-` + arch + `$`), "linux-image-6.1.0-", nil
	case "6.12":
		return regexp.MustCompile(`^linux-image-6\.12\.(\d+)\+deb12-` + arch + `$`), "linux-image-6.12.", nil
	}
	return nil, "", fmt.Errorf("unknown kernel series %q (have 6.1, 6.12)", series)
}

// resolveKernel finds the newest kernel image package of series for arch
// and returns its downloaded .deb. Without a working apt it falls back to
// the newest one in the cache.
func (a *apt) resolveKernel(ctx context.Context, series, arch string) (string, error) {
	re, prefix, err := kernelPattern(series, arch)
	if err != nil {
		return "", err
	}
	if err := a.ensureArch(ctx, arch); err != nil {
		logf("apt: %v", err)
	}
	names, err := a.kernelNames(ctx, re, prefix)
	if err == nil && len(names) == 0 && !a.updated {
		if uerr := a.update(ctx); uerr == nil {
			names, err = a.kernelNames(ctx, re, prefix)
		}
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, name := range names { // newest first
		info, err := a.show(ctx, name, arch)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		deb, err := a.download(ctx, info)
		if err != nil && !a.updated { // the archive may have moved on
			if uerr := a.update(ctx); uerr == nil {
				return a.resolveKernel(ctx, series, arch)
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a.prune(re, prefix, arch, deb)
		return deb, nil
	}
	// Offline: the newest cached one will do.
	cached, _ := filepath.Glob(filepath.Join(a.debs, prefix+"*_"+arch+".deb"))
	sort.Slice(cached, func(i, j int) bool { return buildNumber(re, cached[i]) > buildNumber(re, cached[j]) })
	for _, c := range cached {
		if buildNumber(re, c) >= 0 {
			logf("apt: using cached %s (%v)", filepath.Base(c), errors.Join(errs...))
			return c, nil
		}
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no package matches "+re.String()))
	}
	return "", fmt.Errorf("kernel %s/%s: %w", series, arch, errors.Join(errs...))
}

// prune removes older builds of a kernel series from the cache once a
// newer one is in it, with what was extracted from them.
func (a *apt) prune(re *regexp.Regexp, prefix, arch, keep string) {
	cached, _ := filepath.Glob(filepath.Join(a.debs, prefix+"*_"+arch+".deb"))
	for _, c := range cached {
		if c == keep || buildNumber(re, c) < 0 || buildNumber(re, c) >= buildNumber(re, keep) {
			continue
		}
		logf("apt: removing the older %s from the cache", filepath.Base(c))
		os.Remove(c)
		os.RemoveAll(filepath.Join(filepath.Dir(a.debs), "kernel", strings.TrimSuffix(filepath.Base(c), ".deb")))
	}
}

func (a *apt) kernelNames(ctx context.Context, re *regexp.Regexp, prefix string) ([]string, error) {
	out, err := output(ctx, "apt-cache", "pkgnames", prefix)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range strings.Fields(out) {
		if re.MatchString(n) {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(i, j int) bool { return buildNumber(re, names[i]) > buildNumber(re, names[j]) })
	return names, nil
}

// buildNumber returns the build number of a kernel package name or .deb
// file name, or -1.
func buildNumber(re *regexp.Regexp, s string) int {
	s = filepath.Base(s)
	if name, _, ok := strings.Cut(s, "_"); ok {
		s = name
	}
	m := re.FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// closure returns the packages to install for names: each of them, plus
// the library packages ("lib…") they depend on, transitively. Other
// dependencies (adduser, debconf) are what a full system needs, not a
// guest that only runs the programs.
func (a *apt) closure(ctx context.Context, names []string, arch string) ([]pkgInfo, error) {
	var out []pkgInfo
	seen := map[string]bool{}
	// Breadth first, one apt-cache call a level.
	for level := names; len(level) > 0; {
		var ask []string
		for _, n := range level {
			if !seen[n] {
				seen[n] = true
				ask = append(ask, n)
			}
		}
		if len(ask) == 0 {
			break
		}
		infos, err := a.showAll(ctx, ask, arch)
		if err != nil {
			return nil, err
		}
		level = nil
		for _, info := range infos {
			if info.Arch != "all" && info.Arch != arch {
				return nil, fmt.Errorf("package %s is for %s, want %s", info.Name, info.Arch, arch)
			}
			out = append(out, info)
			for _, d := range info.Depends {
				if strings.HasPrefix(d, "lib") && !seen[d] {
					level = append(level, d)
				}
			}
		}
	}
	return out, nil
}

// unpack extracts deb into the cache (once) and returns the directory.
func (a *apt) unpack(ctx context.Context, deb string) (string, error) {
	dir := filepath.Join(filepath.Dir(a.debs), "root", strings.TrimSuffix(filepath.Base(deb), ".deb"))
	if _, err := os.Stat(filepath.Join(dir, ".unpacked")); err == nil {
		return dir, nil
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := run(ctx, "", "dpkg-deb", "-x", deb, dir); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, ".unpacked"), nil, 0o644)
}

// run runs a command with its output shown only on failure.
func run(ctx context.Context, dir string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(buf.String()))
	}
	return nil
}

// output runs a command and returns its standard output.
func output(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// asRoot runs a command as root: directly when we are root, else through
// sudo when there is one.
func asRoot(ctx context.Context, name string, args ...string) error {
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("sudo"); err != nil {
			return fmt.Errorf("%s needs root and there is no sudo: run it as root", name)
		}
		args = append([]string{"-n", name}, args...)
		name = "sudo"
	}
	return run(ctx, "", name, args...)
}

// ensureTools installs the host programs the harness needs when they are
// missing, with apt-get only.
func ensureTools(ctx context.Context, arches []string, needZstd bool) error {
	type tool struct{ bin, pkg string }
	tools := []tool{{"dpkg-deb", "dpkg"}, {"xz", "xz-utils"}}
	if needZstd {
		tools = append(tools, tool{"zstd", "zstd"})
	}
	for _, a := range arches {
		switch a {
		case "amd64":
			tools = append(tools, tool{"qemu-system-x86_64", "qemu-system-x86"})
		case "arm64":
			tools = append(tools, tool{"qemu-system-aarch64", "qemu-system-arm"})
		}
	}
	var missing []string
	for _, t := range tools {
		if _, err := exec.LookPath(t.bin); err != nil {
			missing = append(missing, t.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	logf("installing %s with apt-get", strings.Join(missing, " "))
	args := append([]string{"install", "-y", "-qq"}, missing...)
	if err := asRootEnv(ctx, args); err != nil {
		if uerr := asRoot(ctx, "apt-get", "update", "-qq"); uerr != nil {
			return errors.Join(err, uerr)
		}
		return asRootEnv(ctx, args)
	}
	return nil
}

func asRootEnv(ctx context.Context, args []string) error {
	os.Setenv("DEBIAN_FRONTEND", "noninteractive")
	return asRoot(ctx, "apt-get", args...)
}
