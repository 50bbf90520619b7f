// Command genuapi generates package uapi, goverbs' Go mirror of the
// kernel's RDMA uapi headers and of the mlx5 device formats in rdma-core's
// mlx5dv.h. make generate runs it, through the generate directive in
// uapi/doc.go.
//
// It reads the headers it lists (headers.go) for names only: object-like
// macros, enum members and struct and union tags. Everything else comes
// from the C compiler. A probe program keeps the macros that are integer
// constant expressions; a second program prints every constant's value and
// the size and offsets of every struct, and the DWARF of a third compile
// describes each struct's members and types; a fourth, for -m32, asserts
// that 32-bit x86 lays the structs out alike. Of the kernel's headers it
// writes:
//
//	zconst.go               the constants, spelt as in the headers
//	ztypes.go               the structs and unions, as Go types
//	znested.go              offsets of members inside unions and nested structs
//	zlayout_test.go         unsafe.Sizeof and unsafe.Offsetof of each, for the layout test
//	testdata/layout.golden  sizeof and offsetof of each, as the C program printed them
//
// mlx5dv.h is compiled apart, in programs of its own (its copies of
// kernel headers share their include guards), and only the constants and
// structs that headers.go names are taken. It becomes:
//
//	zmlx5dv.go              its constants, structs and nested offsets
//	zmlx5dv_layout_test.go  the Go half of its layout test
//	testdata/mlx5dv.golden  the C half
//
// librdmacm's rdma_cma.h, rdma_cma_abi.h and infiniband/ib.h are compiled
// apart too, for what the kernel's rdma_user_cm.h lacks: the event numbers
// (RDMA_CM_EVENT_*), the ABI versions librdmacm accepts, a few constants
// it defines, and struct sockaddr_ib. They become zrdmacm.go, zrdmacm_layout_test.go and
// testdata/rdmacm.golden.
//
// Usage:
//
//	genuapi [-o dir] [-cc compiler] [-linux-libc-dev-deb file] [-libibverbs-dev-deb file] [-librdmacm-dev-deb file] [-keep] [-v]
//
// Its inputs are pinned (pins.go): the kernel's headers come from Debian's
// linux-libc-dev 6.1.176-1, mlx5dv.h from libibverbs-dev 44.0-2 and
// rdma_cma.h from librdmacm-dev 44.0-2, never from the host's /usr/include, so that every machine writes the same
// files. Unless a flag names a package file, genuapi downloads each with
// apt-get download into headers/ in the goverbs cache ($GOVERBS_CACHE,
// else $XDG_CACHE_HOME/goverbs, else ~/.cache/goverbs) and unpacks it with
// dpkg-deb into its temporary directory; it installs nothing. Besides
// those it needs a C compiler (gcc) and libc's headers. Building uapi
// needs none of these.
package main

import (
	"debug/dwarf"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"slices"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("genuapi: ")
	var o options
	flag.StringVar(&o.out, "o", ".", "write the files into `dir` (package uapi)")
	flag.StringVar(&o.cc, "cc", envOr("CC", "gcc"), "the C `compiler`")
	flag.StringVar(&o.kernelDeb, "linux-libc-dev-deb", "", "take the kernel's headers from this linux-libc-dev `package` file (default: "+linuxLibcDev.String()+", downloaded with apt-get into the cache)")
	flag.StringVar(&o.rdmaCoreDeb, "libibverbs-dev-deb", "", "take mlx5dv.h from this libibverbs-dev `package` file (default: "+libibverbsDev.String()+", downloaded with apt-get into the cache)")
	flag.StringVar(&o.rdmacmDeb, "librdmacm-dev-deb", "", "take rdma_cma.h from this librdmacm-dev `package` file (default: "+librdmacmDev.String()+", downloaded with apt-get into the cache)")
	flag.BoolVar(&o.keep, "keep", false, "keep the C programs (the temporary directory is printed)")
	flag.BoolVar(&o.verbose, "v", false, "list the macros that are not integer constants")
	fetch := flag.Bool("fetch", false, "only download the pinned packages into the cache (make pins), where the up-to-date test reads them offline")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *fetch {
		for _, p := range pins {
			deb, err := p.download()
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(deb)
		}
		return
	}
	for _, in := range []struct {
		deb *string
		pin pin
	}{{&o.kernelDeb, linuxLibcDev}, {&o.rdmaCoreDeb, libibverbsDev}, {&o.rdmacmDeb, librdmacmDev}} {
		if *in.deb != "" {
			continue
		}
		deb, err := in.pin.download()
		if err != nil {
			log.Fatal(err)
		}
		*in.deb = deb
	}
	if err := generate(o); err != nil {
		log.Fatal(err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// options are generate's.
type options struct {
	out         string // the uapi directory
	cc          string // the C compiler
	kernelDeb   string // linux-libc-dev's .deb, for the kernel's headers
	rdmaCoreDeb string // libibverbs-dev's .deb, for mlx5dv.h
	rdmacmDeb   string // librdmacm-dev's .deb, for rdma_cma.h
	keep        bool   // keep the temporary directory
	verbose     bool   // list the macros that are not integer constants
}

// A unitResult is what one unit's headers and C programs gave.
type unitResult struct {
	name    string // the unit's, for messages
	groups  []constGroup
	vals    map[string]value
	mirrors []*mirror
	layout  []string          // the C program's sizeof and offsetof lines
	nested  map[string]uint64 // the nested offsets' values
}

func generate(o options) error {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		// The golden layouts and the structs are x86-64's; the layout test
		// proves them on the other architectures.
		return fmt.Errorf("run on linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	dir, err := os.MkdirTemp("", "genuapi")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "genuapi: C programs in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	// The packages' headers, unpacked into the temporary directory and
	// searched before the host's, whose libc headers the programs still
	// use.
	kroot := filepath.Join(dir, "linux-libc-dev")
	kpkg, err := linuxLibcDev.unpack(o.kernelDeb, kroot)
	if err != nil {
		return err
	}
	kinc := filepath.Join(kroot, "usr", "include")
	sysFlags := []string{"-isystem", kinc, "-isystem", filepath.Join(kinc, "x86_64-linux-gnu")}

	kernel := unit{name: "kernel uapi", headers: headers, nested: nestedOffsets}
	kr, err := kernel.run(o, kinc, kinc, filepath.Join(dir, "uapi"), sysFlags)
	if err != nil {
		return err
	}
	origin := fmt.Sprintf("genuapi (make generate) from rdma/*.h, %s (Debian), linux/amd64", kpkg)
	files := map[string]string{
		"zconst.go":              constSource(origin, kr.groups, kr.vals),
		"ztypes.go":              typesSource(origin, kr.mirrors),
		"zlayout_test.go":        layoutSource(origin, kr.mirrors, "goLayout", "testdata/layout.golden"),
		"znested.go":             nestedSource(origin, kernel.nested, kr.nested),
		"testdata/layout.golden": goldenSource(origin, kr.layout),
	}

	// rdma-core's headers, beside the kernel's.
	root := filepath.Join(dir, "rdma-core")
	pkg, err := libibverbsDev.unpack(o.rdmaCoreDeb, root)
	if err != nil {
		return err
	}
	rinc := filepath.Join(root, "usr", "include")
	mlx5dv := unit{name: "mlx5dv.h", headers: mlx5dvHeaders, nested: mlx5dvNestedOffsets}
	mr, err := mlx5dv.run(o, rinc, kinc, filepath.Join(dir, "mlx5dv"), append([]string{"-isystem", rinc}, sysFlags...))
	if err != nil {
		return err
	}
	if err := disjoint(kr, mr); err != nil {
		return err
	}
	origin = fmt.Sprintf("genuapi (make generate) from infiniband/mlx5dv.h, %s (rdma-core), linux/amd64", pkg)
	files["zmlx5dv.go"] = mlx5dvSource(origin, mr.groups, mr.vals, mr.mirrors, mlx5dv.nested, mr.nested)
	files["zmlx5dv_layout_test.go"] = layoutSource(origin, mr.mirrors, "goLayoutMlx5DV", "testdata/mlx5dv.golden")
	files["testdata/mlx5dv.golden"] = goldenSource(origin, mr.layout)

	// librdmacm's headers, which include libibverbs' (verbs.h, sa.h): both
	// packages' include directories, then the kernel's.
	cmroot := filepath.Join(dir, "librdmacm")
	cmpkg, err := librdmacmDev.unpack(o.rdmacmDeb, cmroot)
	if err != nil {
		return err
	}
	cminc := filepath.Join(cmroot, "usr", "include")
	rdmacm := unit{name: "rdma_cma.h", headers: rdmacmHeaders}
	cr, err := rdmacm.run(o, cminc, kinc, filepath.Join(dir, "rdmacm"), append([]string{"-isystem", cminc, "-isystem", rinc}, sysFlags...))
	if err != nil {
		return err
	}
	if err := disjoint(kr, cr); err != nil {
		return err
	}
	if err := disjoint(mr, cr); err != nil {
		return err
	}
	origin = fmt.Sprintf("genuapi (make generate) from rdma/rdma_cma.h, rdma/rdma_cma_abi.h and infiniband/ib.h, %s (rdma-core), linux/amd64", cmpkg)
	files["zrdmacm.go"] = rdmacmSource(origin, cr.groups, cr.vals, cr.mirrors)
	files["zrdmacm_layout_test.go"] = layoutSource(origin, cr.mirrors, "goLayoutRDMACM", "testdata/rdmacm.golden")
	files["testdata/rdmacm.golden"] = goldenSource(origin, cr.layout)

	for name, src := range files {
		if err := writeFile(filepath.Join(o.out, name), src); err != nil {
			return err
		}
	}
	return nil
}

// run reads u's headers under inc for names and compiles its C programs
// in work, with the include flags given; kinc holds the kernel's headers.
func (u unit) run(o options, inc, kinc, work string, flags []string) (*unitResult, error) {
	r := &unitResult{name: u.name}

	// Names, from the headers' text.
	var tags []*tagDef
	tagIndex := map[string]*tagDef{}
	seen := map[string]bool{}
	var names []string
	for _, h := range u.headers {
		src, err := os.ReadFile(filepath.Join(inc, h.path))
		if err != nil {
			return nil, err
		}
		gs, ts, err := scan(h, string(src))
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			var kept []string
			for _, n := range g.names {
				if (h.keep == nil || h.keep(n, g)) && !seen[n] {
					seen[n] = true
					kept = append(kept, n)
				}
			}
			if len(kept) > 0 {
				g.names = kept
				r.groups = append(r.groups, g)
				names = append(names, kept...)
			}
		}
		if !h.structs {
			continue
		}
		for i := range ts {
			t := &ts[i]
			key := t.kind + " " + t.tag
			if h.tags != nil && !slices.Contains(h.tags, key) {
				continue
			}
			if tagIndex[key] != nil {
				return nil, fmt.Errorf("%s defined twice", key)
			}
			tagIndex[key] = t
			tags = append(tags, t)
		}
		for _, key := range h.tags {
			if tagIndex[key] == nil {
				return nil, fmt.Errorf("%s: no %s", h.path, key)
			}
		}
	}

	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	c := &cc{path: o.cc, dir: work, kinc: kinc, flags: flags, headers: u.headers}

	// Values.
	consts, err := c.integerConstants(names)
	if err != nil {
		return nil, err
	}
	if o.verbose {
		ok := map[string]bool{}
		for _, n := range consts {
			ok[n] = true
		}
		for _, n := range names {
			if !ok[n] {
				fmt.Fprintln(os.Stderr, "genuapi: not an integer constant:", n)
			}
		}
	}

	// Structs.
	obj, err := c.debugObject()
	if err != nil {
		return nil, err
	}
	dw, err := readDWARF(obj)
	if err != nil {
		return nil, err
	}
	b := &typeBuilder{tags: tagIndex, done: map[string]*mirror{}, dw: dw, busy: map[string]bool{},
		pointer: gotype{expr: "Pointer", size: 8, align: 8}}
	goNames := map[string]string{}
	for _, t := range tags {
		m, err := b.mirrorOf(t)
		if err != nil {
			return nil, err
		}
		if other, ok := goNames[m.goName]; ok {
			return nil, fmt.Errorf("%s %s and %s both become Go type %s", t.kind, t.tag, other, m.goName)
		}
		goNames[m.goName] = t.kind + " " + t.tag
		r.mirrors = append(r.mirrors, m)
	}
	for _, t := range tags {
		for _, p := range pointerFields[t.tag] {
			if !hasMember(dw[t.kind+" "+t.tag], p) {
				return nil, fmt.Errorf("pointerFields: %s %s has no member %s", t.kind, t.tag, p)
			}
		}
	}

	if r.vals, r.layout, r.nested, err = c.program(consts, r.mirrors, u.nested); err != nil {
		return nil, err
	}
	ok32, err := c.check32(r.layout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u.name, err)
	}
	if !ok32 {
		fmt.Fprintf(os.Stderr, "genuapi: %s -m32 does not work here; 32-bit layouts of %s not checked\n", o.cc, u.name)
	}
	return r, nil
}

// disjoint checks that two units' files, which share package uapi,
// declare no name twice.
func disjoint(a, b *unitResult) error {
	names := map[string]bool{}
	for _, g := range a.groups {
		for _, n := range g.names {
			names[n] = true
		}
	}
	for _, m := range a.mirrors {
		names[m.goName] = true
	}
	for n := range a.nested {
		names[n] = true
	}
	for _, g := range b.groups {
		for _, n := range g.names {
			if names[n] {
				return fmt.Errorf("%s: %s is also declared by %s", g.header, n, a.name)
			}
		}
	}
	for _, m := range b.mirrors {
		if names[m.goName] {
			return fmt.Errorf("%s %s becomes Go type %s, which %s declares", m.kind, m.tag, m.goName, a.name)
		}
	}
	for n := range b.nested {
		if names[n] {
			return fmt.Errorf("nested offset %s is also declared by %s", n, a.name)
		}
	}
	return nil
}

func hasMember(st *dwarf.StructType, name string) bool {
	if st == nil {
		return false
	}
	for _, f := range st.Field {
		if f.Name == name {
			return true
		}
	}
	return false
}
