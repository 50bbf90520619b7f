package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// neededModules are the modules soft-RoCE needs, by name. crc32_generic
// is not a declared dependency of rdma_rxe, but rxe fails to add a link
// without a crc32 implementation; dummy and veth carry its traffic.
// configfs, ib_cm, iw_cm, rdma_cm and rdma_ucm are the connection manager:
// rdma_ucm makes /dev/infiniband/rdma_cm, which librdmacm (rping, udaddy)
// and goverbs' rdmacm open. Their declared dependencies would bring in the
// first four; they are named to say what the guest has. A module a kernel
// has built in is left out of the load order.
var neededModules = []string{
	"crc32_generic", "udp_tunnel", "ip6_udp_tunnel", "ib_core", "ib_uverbs", "rdma_rxe",
	"dummy", "veth",
	"configfs", "ib_cm", "iw_cm", "rdma_cm", "rdma_ucm",
}

// guestDevices are the char devices the guest's /init waits for before
// the first step: the connection manager's, made by devtmpfs when
// rdma_ucm registers its misc device. (uverbs0 is each rxe link's own
// WaitFor.)
var guestDevices = []string{"/dev/infiniband/rdma_cm"}

// kernel is an extracted kernel: its image and the modules we load, in
// load order.
type kernel struct {
	Release string // "6.1.0-56-amd64"
	Image   string
	Modules []string // host paths of decompressed .ko files, dependencies first
}

// extractKernel extracts the image and the needed modules of a kernel
// .deb into the cache, once. A kernel package ships no modules.dep
// (depmod writes it at install time), so the dependencies are read from
// each module's .modinfo "depends=" field, which is what depmod reads;
// the result is written to modules.dep in the cache in depmod's format.
func extractKernel(ctx context.Context, cache, deb string, want []string) (*kernel, error) {
	dir := filepath.Join(cache, "kernel", strings.TrimSuffix(filepath.Base(deb), ".deb"))
	if k, err := loadKernel(dir, want); err == nil {
		return k, nil
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "modules"), 0o755); err != nil {
		return nil, err
	}
	k := &kernel{}
	index := map[string]string{} // module name -> path in the package
	builtin := map[string]bool{}
	deps := map[string][]string{}
	pending := map[string]bool{}
	for _, w := range want {
		pending[modName(w)] = true
	}
	// Pass 1 indexes the package and takes the image and what is already
	// wanted; later passes take dependencies found on the way.
	for pass := 0; len(pending) > 0; pass++ {
		if pass > 8 {
			return nil, fmt.Errorf("%s: module dependencies do not settle", deb)
		}
		take := pending
		pending = map[string]bool{}
		err := walkDeb(ctx, deb, func(name string, r io.Reader) error {
			switch {
			case pass == 0 && strings.HasPrefix(name, "boot/vmlinuz-"):
				k.Release = strings.TrimPrefix(name, "boot/vmlinuz-")
				k.Image = filepath.Join(dir, "vmlinuz")
				return writeFile(k.Image, r)
			case pass == 0 && strings.HasSuffix(name, "/modules.builtin"):
				b, err := io.ReadAll(r)
				for _, l := range strings.Fields(string(b)) {
					builtin[modName(l)] = true
				}
				return err
			case strings.Contains(name, ".ko"):
				m := modName(name)
				if pass == 0 {
					index[m] = name
				}
				if !take[m] {
					return nil
				}
				data, err := decompress(ctx, name, r)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				d, err := modDepends(data)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				deps[m] = d
				return os.WriteFile(filepath.Join(dir, "modules", m+".ko"), data, 0o644)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for m := range take {
			if _, ok := deps[m]; !ok && !builtin[m] {
				if _, ok := index[m]; !ok {
					return nil, fmt.Errorf("%s: no module %s in the package (and not built in)", deb, m)
				}
			}
		}
		for _, ds := range deps {
			for _, d := range ds {
				if _, ok := deps[d]; !ok && !builtin[d] && !take[d] {
					pending[d] = true
				}
			}
		}
	}
	if k.Image == "" {
		return nil, fmt.Errorf("%s: no boot/vmlinuz-* in the package", deb)
	}
	// modules.dep, depmod's format, with our paths.
	var dep bytes.Buffer
	names := make([]string, 0, len(deps))
	for m := range deps {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		fmt.Fprintf(&dep, "%s.ko:", m)
		for _, d := range deps[m] {
			if !builtin[d] {
				fmt.Fprintf(&dep, " %s.ko", d)
			}
		}
		dep.WriteString("\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), dep.Bytes(), 0o644); err != nil {
		return nil, err
	}
	var bl []string
	for m := range builtin {
		bl = append(bl, m)
	}
	sort.Strings(bl)
	if err := os.WriteFile(filepath.Join(dir, "builtin"), []byte(strings.Join(bl, "\n")), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), []byte(k.Release), 0o644); err != nil {
		return nil, err
	}
	return loadKernel(dir, want)
}

// loadKernel reads an extracted kernel from the cache and orders the
// wanted modules from modules.dep.
func loadKernel(dir string, want []string) (*kernel, error) {
	rel, err := os.ReadFile(filepath.Join(dir, "release"))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps, err := parseModulesDep(f)
	if err != nil {
		return nil, err
	}
	bl, err := os.ReadFile(filepath.Join(dir, "builtin"))
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	for _, m := range strings.Fields(string(bl)) {
		builtin[m] = true
	}
	for _, w := range want {
		if _, ok := deps[modName(w)]; !ok && !builtin[modName(w)] {
			return nil, fmt.Errorf("module %s not extracted", w)
		}
	}
	order, err := loadOrder(deps, want)
	if err != nil {
		return nil, err
	}
	k := &kernel{Release: string(rel), Image: filepath.Join(dir, "vmlinuz")}
	for _, m := range order {
		k.Modules = append(k.Modules, filepath.Join(dir, "modules", m+".ko"))
	}
	return k, nil
}

// parseModulesDep reads depmod's "path.ko: dep.ko dep.ko" lines into
// module names.
func parseModulesDep(r io.Reader) (map[string][]string, error) {
	deps := map[string][]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		mod, rest, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("modules.dep: bad line %q", line)
		}
		var ds []string
		for _, d := range strings.Fields(rest) {
			ds = append(ds, modName(d))
		}
		deps[modName(mod)] = ds
	}
	return deps, sc.Err()
}

// loadOrder returns want and everything it depends on, dependencies first.
// Names missing from deps are taken to be built in.
func loadOrder(deps map[string][]string, want []string) ([]string, error) {
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(m string, chain []string) error
	visit = func(m string, chain []string) error {
		switch state[m] {
		case 1:
			return fmt.Errorf("module dependency cycle: %s", strings.Join(append(chain, m), " -> "))
		case 2:
			return nil
		}
		ds, ok := deps[m]
		if !ok {
			state[m] = 2 // built in
			return nil
		}
		state[m] = 1
		for _, d := range ds {
			if err := visit(d, append(chain, m)); err != nil {
				return err
			}
		}
		state[m] = 2
		order = append(order, m)
		return nil
	}
	for _, w := range want {
		if err := visit(modName(w), nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// modName turns "kernel/net/ipv4/udp_tunnel.ko.xz" or "udp-tunnel" into
// "udp_tunnel", the way modprobe compares names.
func modName(p string) string {
	b := path.Base(p)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

// modDepends reads the "depends=" entry of a module's .modinfo section.
func modDepends(ko []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, err
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, errors.New("no .modinfo section")
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var out []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					out = append(out, modName(d))
				}
			}
			return out, nil
		}
	}
	return nil, nil
}

// decompress returns the plain module bytes of a .ko, .ko.xz, .ko.zst or .ko.gz.
func decompress(ctx context.Context, name string, r io.Reader) ([]byte, error) {
	var tool string
	switch {
	case strings.HasSuffix(name, ".ko"):
		return io.ReadAll(r)
	case strings.HasSuffix(name, ".gz"):
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		return io.ReadAll(z)
	case strings.HasSuffix(name, ".xz"):
		tool = "xz"
	case strings.HasSuffix(name, ".zst"):
		tool = "zstd"
	default:
		return nil, fmt.Errorf("unknown module compression")
	}
	cmd := exec.CommandContext(ctx, tool, "-dc")
	cmd.Stdin = r
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s -dc: %w: %s", tool, err, stderr.String())
	}
	return out, nil
}

// walkDeb streams the files of a .deb's data archive to fn, with names
// relative to the root ("boot/vmlinuz-…").
func walkDeb(ctx context.Context, deb string, fn func(name string, r io.Reader) error) error {
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	tr := tar.NewReader(pipe)
	var walkErr error
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			walkErr = err
			break
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if err := fn(strings.TrimPrefix(h.Name, "./"), tr); err != nil {
			walkErr = err
			break
		}
	}
	io.Copy(io.Discard, pipe)
	if err := cmd.Wait(); err != nil && walkErr == nil {
		walkErr = fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w: %s", deb, err, stderr.String())
	}
	return walkErr
}

func writeFile(dst string, r io.Reader) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
