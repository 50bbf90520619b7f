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

// rdma-core's mlx5dv.h, and the verbs.h and other headers it includes, come
// from Debian's libibverbs-dev, pinned to one version so that the files are
// the same wherever they are made. genuapi downloads the package with
// apt-get download into the cache, and unpacks it with dpkg-deb -x into its
// temporary directory: nothing is installed, and nothing needs root.
const (
	rdmaCorePackage = "libibverbs-dev"
	rdmaCoreVersion = "44.0-2" // Debian bookworm's rdma-core
	rdmaCoreArch    = "amd64"  // the headers are the same on every architecture
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

// downloadRDMACore returns the path of libibverbs-dev's .deb in the cache
// (headers/ under cacheDir), downloading it first if it is not there.
func downloadRDMACore() (string, error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "headers")
	name := fmt.Sprintf("%s_%s_%s.deb", rdmaCorePackage, strings.ReplaceAll(rdmaCoreVersion, ":", "%3a"), rdmaCoreArch)
	deb := filepath.Join(dir, name)
	if _, err := os.Stat(deb); err == nil {
		return deb, nil
	}
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
	spec := fmt.Sprintf("%s:%s=%s", rdmaCorePackage, rdmaCoreArch, rdmaCoreVersion)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// As root, apt would hand the download to its _apt user, which may not
	// write here.
	cmd := exec.CommandContext(ctx, "apt-get", "download", "-qq", "-o", "APT::Sandbox::User=root", spec)
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("apt-get download %s (for mlx5dv.h): %v: %s", spec, err, strings.TrimSpace(out.String()))
	}
	if err := os.Rename(filepath.Join(tmp, name), deb); err != nil {
		return "", fmt.Errorf("apt-get download %s: %w", spec, err)
	}
	return deb, nil
}

// unpackDeb extracts the package deb into dir with dpkg-deb -x and returns
// its name and version, "libibverbs-dev 44.0-2".
func unpackDeb(deb, dir string) (string, error) {
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
	return pkg + " " + version, nil
}
