// Command genuapi generates package uapi, goverbs' Go mirror of the
// kernel's RDMA uapi headers. make generate runs it, through the
// generate directive in uapi/doc.go.
//
// It reads the headers it lists (headers.go) for names only: object-like
// macros, enum members and struct and union tags. Everything else comes
// from the C compiler. A probe program keeps the macros that are integer
// constant expressions; a second program prints every constant's value and
// the size and offsets of every struct, and the DWARF of a third compile
// describes each struct's members and types. It writes:
//
//	zconst.go               the constants, spelt as in the headers
//	ztypes.go               the structs and unions, as Go types
//	zlayout_test.go         unsafe.Sizeof and unsafe.Offsetof of each, for the layout test
//	testdata/layout.golden  sizeof and offsetof of each, as the C program printed them
//
// Usage:
//
//	genuapi [-o dir] [-include dir] [-cc compiler] [-keep]
//
// It needs a C compiler (gcc) and the headers (Debian's linux-libc-dev);
// building uapi needs neither.
package main

import (
	"debug/dwarf"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("genuapi: ")
	out := flag.String("o", ".", "write the files into `dir` (package uapi)")
	inc := flag.String("include", "/usr/include", "read the headers from `dir`")
	cc := flag.String("cc", envOr("CC", "gcc"), "the C `compiler`")
	keep := flag.Bool("keep", false, "keep the C programs (the temporary directory is printed)")
	verbose := flag.Bool("v", false, "list the macros that are not integer constants")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := generate(*out, *inc, *cc, *keep, *verbose); err != nil {
		log.Fatal(err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func generate(outDir, inc, compiler string, keep, verbose bool) error {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		// The golden layouts and the structs are x86-64's; the layout test
		// proves them on the other architectures.
		return fmt.Errorf("run on linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}

	// Names, from the headers' text.
	var groups []constGroup
	var tags []*tagDef
	tagIndex := map[string]*tagDef{}
	seen := map[string]bool{}
	var names []string
	for _, h := range headers {
		src, err := os.ReadFile(filepath.Join(inc, h.path))
		if err != nil {
			return err
		}
		gs, ts, err := scan(h, string(src))
		if err != nil {
			return err
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
				groups = append(groups, g)
				names = append(names, kept...)
			}
		}
		if h.structs {
			for i := range ts {
				t := &ts[i]
				key := t.kind + " " + t.tag
				if tagIndex[key] != nil {
					return fmt.Errorf("%s defined twice", key)
				}
				tagIndex[key] = t
				tags = append(tags, t)
			}
		}
	}

	dir, err := os.MkdirTemp("", "genuapi")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(os.Stderr, "genuapi: C programs in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	c := &cc{path: compiler, dir: dir, inc: inc}
	if inc != "/usr/include" {
		c.flags = []string{"-isystem", inc}
	}

	// Values.
	consts, err := c.integerConstants(names)
	if err != nil {
		return err
	}
	if verbose {
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
		return err
	}
	dw, err := readDWARF(obj)
	if err != nil {
		return err
	}
	b := &typeBuilder{tags: tagIndex, done: map[string]*mirror{}, dw: dw, busy: map[string]bool{},
		pointer: gotype{expr: "Pointer", size: 8, align: 8}}
	var mirrors []*mirror
	goNames := map[string]string{}
	for _, t := range tags {
		m, err := b.mirrorOf(t)
		if err != nil {
			return err
		}
		if other, ok := goNames[m.goName]; ok {
			return fmt.Errorf("%s %s and %s both become Go type %s", t.kind, t.tag, other, m.goName)
		}
		goNames[m.goName] = t.kind + " " + t.tag
		mirrors = append(mirrors, m)
	}
	for _, t := range tags {
		for _, p := range pointerFields[t.tag] {
			if !hasMember(dw[t.kind+" "+t.tag], p) {
				return fmt.Errorf("pointerFields: %s %s has no member %s", t.kind, t.tag, p)
			}
		}
	}

	vals, layout, nested, err := c.program(consts, mirrors)
	if err != nil {
		return err
	}
	ok32, err := c.check32(layout)
	if err != nil {
		return err
	}
	if !ok32 {
		fmt.Fprintf(os.Stderr, "genuapi: %s -m32 does not work here; 32-bit layouts not checked\n", compiler)
	}

	origin := fmt.Sprintf("genuapi (make generate) from %s/rdma, linux-libc-dev %s, linux/amd64", inc, pkgVersion())
	files := map[string]string{
		"zconst.go":              constSource(origin, groups, vals),
		"ztypes.go":              typesSource(origin, mirrors),
		"zlayout_test.go":        layoutSource(origin, mirrors),
		"znested.go":             nestedSource(origin, nested),
		"testdata/layout.golden": goldenSource(origin, layout),
	}
	for name, src := range files {
		if err := writeFile(filepath.Join(outDir, name), src); err != nil {
			return err
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

// pkgVersion is the version of the Debian package that installed the
// headers, as dpkg-query reports it.
func pkgVersion() string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "linux-libc-dev").Output()
	if err != nil || len(out) == 0 {
		return "(version unknown)"
	}
	return strings.TrimSpace(string(out))
}
