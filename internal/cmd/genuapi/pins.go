package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// A pin is one Debian package whose headers genuapi reads, at one
// version, so that the generated files are the same on every machine
// whatever its /usr/include holds, as golang.org/x/sys pins its kernel and
// glibc sources. genuapi downloads each with apt-get download into the
// cache and unpacks it with dpkg-deb -x into its temporary directory:
// nothing is installed, and nothing needs root.
type pin struct {
	pkg, version, arch string
}

func (p pin) String() string { return p.pkg + " " + p.version }

// The pinned inputs. The versions are Debian bookworm's final point
// release, which its archive keeps as long as bookworm is served; a pin
// moves only with make generate and the files it rewrites. The headers
// are the same on every architecture; amd64's package is taken.
var (
	// The kernel's uapi headers (rdma/*.h).
	linuxLibcDev = pin{"linux-libc-dev", "6.1.176-1", "amd64"}
	// rdma-core's mlx5dv.h, and the verbs.h and other headers it includes.
	libibverbsDev = pin{"libibverbs-dev", "44.0-2", "amd64"}
	// rdma-core's librdmacm headers: rdma_cma.h (the event numbers the
	// kernel's uapi leaves out) and infiniband/ib.h (struct sockaddr_ib),
	// from the same rdma-core release as libibverbs-dev.
	librdmacmDev = pin{"librdmacm-dev", "44.0-2", "amd64"}
)

// cacheDir is where goverbs keeps downloads: $GOVERBS_CACHE, else
// $XDG_CACHE_HOME/goverbs, else ~/.cache/goverbs (as the VM harness does).
func cacheDir() (string, error) {
	if d := os.Getenv("GOVERBS_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "goverbs"), nil
}

// pins are every pinned input, in the order generate reads them.
var pins = []pin{linuxLibcDev, libibverbsDev, librdmacmDev}

// path returns where p's .deb lives in the cache (headers/ under
// cacheDir), there or not.
func (p pin) path() (string, error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s_%s_%s.deb", p.pkg, strings.ReplaceAll(p.version, ":", "%3a"), p.arch)
	return filepath.Join(cache, "headers", name), nil
}

// cached returns the path of p's .deb in the cache, or an error that says
// it is not there and how to get it. It never downloads: go test calls it.
func (p pin) cached() (string, error) {
	deb, err := p.path()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(deb); err != nil {
		return "", fmt.Errorf("the pinned %s is not in the cache (%s): make pins downloads it", p, deb)
	}
	return deb, nil
}

// download returns the path of p's .deb in the cache, downloading it
// first if it is not there. Only make generate and make pins call it.
func (p pin) download() (string, error) {
	deb, err := p.path()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(deb); err == nil {
		return deb, nil
	}
	dir := filepath.Dir(deb)
	name := filepath.Base(deb)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Into a directory of its own, then renamed: a download cut short
	// never stands in the cache as the package.
	tmp, err := os.MkdirTemp(dir, ".download")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	spec := fmt.Sprintf("%s:%s=%s", p.pkg, p.arch, p.version)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// As root, apt would hand the download to its _apt user, which may not
	// write here.
	get := func() (string, error) {
		cmd := exec.CommandContext(ctx, "apt-get", "download", "-qq", "-o", "APT::Sandbox::User=root", spec)
		cmd.Dir = tmp
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return strings.TrimSpace(out.String()), err
	}
	out, err := get()
	if err != nil {
		// A machine whose package lists were never fetched (a fresh one)
		// knows no version of anything: fetch them once and try again.
		if uout, uerr := exec.CommandContext(ctx, "apt-get", "update", "-qq").CombinedOutput(); uerr != nil {
			return "", fmt.Errorf("apt-get download %s (genuapi's pinned input): %v: %s; apt-get update: %v: %s", spec, err, out, uerr, bytes.TrimSpace(uout))
		}
		if out, err = get(); err != nil {
			return "", fmt.Errorf("apt-get download %s (genuapi's pinned input): %v: %s", spec, err, out)
		}
	}
	if err := os.Rename(filepath.Join(tmp, name), deb); err != nil {
		return "", fmt.Errorf("apt-get download %s: %w", spec, err)
	}
	return deb, nil
}

// unpack extracts the package file deb, which must be p's package at any
// version, into dir with dpkg-deb -x, and returns its name and version as
// the package states them: "libibverbs-dev 44.0-2".
func (p pin) unpack(deb, dir string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command("dpkg-deb", "-x", deb, dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("dpkg-deb -x %s: %v: %s", deb, err, strings.TrimSpace(out.String()))
	}
	f, err := exec.Command("dpkg-deb", "-f", deb, "Package", "Version").Output()
	if err != nil {
		return "", fmt.Errorf("dpkg-deb -f %s: %w", deb, err)
	}
	var pkg, version string
	for _, line := range strings.Split(string(f), "\n") {
		if v, ok := strings.CutPrefix(line, "Package: "); ok {
			pkg = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(line, "Version: "); ok {
			version = strings.TrimSpace(v)
		}
	}
	if pkg == "" || version == "" {
		return "", fmt.Errorf("dpkg-deb -f %s: no Package or Version: %q", deb, f)
	}
	if pkg != p.pkg {
		return "", fmt.Errorf("%s is package %s, not %s", deb, pkg, p.pkg)
	}
	return pkg + " " + version, nil
}
