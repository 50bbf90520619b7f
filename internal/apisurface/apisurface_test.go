package apisurface

import (
	"bytes"
	"errors"
	"go/ast"
	"go/build"
	"go/parser"
	"go/printer"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// targets are the systems and architectures whose API must equal the
// reference's (the first). Architectures matter too: uapi picks files by
// pointer size and byte order.
var targets = []struct{ goos, goarch string }{
	{"linux", "amd64"},
	{"linux", "386"},
	{"linux", "arm64"},
	{"linux", "s390x"},
	{"darwin", "arm64"},
	{"darwin", "amd64"},
	{"windows", "amd64"},
}

func TestSameAPIEverywhere(t *testing.T) {
	root := moduleRoot(t)
	dirs := publicDirs(t, root)
	if len(dirs) == 0 {
		t.Fatal("no public packages found")
	}
	for _, rel := range dirs {
		t.Run(rel, func(t *testing.T) {
			ref := targets[0]
			want, isMain := surface(t, filepath.Join(root, rel), ref.goos, ref.goarch)
			if isMain {
				t.Skip("package main exports nothing")
			}
			for _, tg := range targets[1:] {
				got, _ := surface(t, filepath.Join(root, rel), tg.goos, tg.goarch)
				if diff := compare(want, got); diff != "" {
					t.Errorf("%s/%s exports differ from %s/%s; give each Linux-only name a stub of the same signature in a *_other.go file, or move it into an untagged file:\n%s",
						tg.goos, tg.goarch, ref.goos, ref.goarch, diff)
				}
			}
		})
	}
}

// TestProvidersExportNothing holds the providers sealed, as database/sql
// drivers are: each registers an unexported driver with internal/provider
// in its init, and exports nothing on any target, so that no change inside
// one changes goverbs' API.
func TestProvidersExportNothing(t *testing.T) {
	root := moduleRoot(t)
	var n int
	for _, rel := range publicDirs(t, root) {
		if !strings.HasPrefix(rel, "provider/") {
			continue
		}
		n++
		for _, tg := range targets {
			if api, _ := surface(t, filepath.Join(root, rel), tg.goos, tg.goarch); len(api) != 0 {
				t.Errorf("%s exports %v on %s/%s; a provider exports nothing (internal/provider holds what is shared)", rel, slices.Sorted(maps.Keys(api)), tg.goos, tg.goarch)
			}
		}
	}
	if n == 0 {
		t.Fatal("no providers found under provider/")
	}
}

// TestSurfaceSeesStubs proves the comparison can fail: a Linux-only
// exported function is a difference.
func TestSurfaceSeesStubs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.go", "package p\n\ntype T struct{ A int }\n")
	write("a_linux.go", "package p\n\nfunc New() (*T, error) { return nil, nil }\n\nfunc (*T) Close() error { return nil }\n")
	write("a_other.go", "//go:build !linux\n\npackage p\n\nfunc New() (*T, error) { return nil, nil }\n")
	linux, _ := surface(t, dir, "linux", "amd64")
	darwin, _ := surface(t, dir, "darwin", "arm64")
	want := map[string]string{
		"type T":         "struct",
		"field T.A":      "int",
		"func New":       "func() (*T, error)",
		"method T.Close": "func() error",
	}
	if diff := cmp.Diff(want, linux); diff != "" {
		t.Errorf("linux surface (-want +got):\n%s", diff)
	}
	if _, ok := darwin["method T.Close"]; ok || cmp.Equal(linux, darwin) {
		t.Errorf("darwin surface %v: the missing Close stub went unseen", darwin)
	}
}

// compare lists the differences of two surfaces, one per line, sorted.
func compare(want, got map[string]string) string {
	var lines []string
	for k, w := range want {
		switch g, ok := got[k]; {
		case !ok:
			lines = append(lines, "\tmissing: "+k+" "+w)
		case g != w:
			lines = append(lines, "\tdiffers: "+k+" "+w+", here "+g)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			lines = append(lines, "\textra:   "+k+" "+g)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			// The VM harness runs test binaries without the source tree.
			t.Skip("go.mod not found above the test's directory: no source tree to read")
		}
		dir = up
	}
}

// publicDirs lists the module's directories, relative to root, that hold
// importable packages: not internal, not testdata.
func publicDirs(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	for _, rel := range packageDirs(t, root) {
		if rel == "." || slices.Contains(strings.Split(rel, "/"), "internal") {
			continue
		}
		dirs = append(dirs, rel)
	}
	return dirs
}

// surface returns what the package in dir exports for goos/goarch with
// cgo off: "func F", "method T.M", "type T", "field T.F", "const C" and
// "var V", each with its type as the source spells it ("struct" and
// "interface" for those). isMain reports a command.
func surface(t *testing.T, dir, goos, goarch string) (api map[string]string, isMain bool) {
	t.Helper()
	ctx := buildContext(goos, goarch)
	pkg, err := ctx.ImportDir(dir, 0)
	var noGo *build.NoGoError
	switch {
	case errors.As(err, &noGo):
		return map[string]string{}, false
	case err != nil:
		t.Fatalf("%s for %s/%s: %v", dir, goos, goarch, err)
	}
	api = map[string]string{}
	fset := token.NewFileSet()
	str := func(n ast.Node) string {
		if n == nil {
			return ""
		}
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, n); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	files := slices.Clone(pkg.GoFiles)
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					api["func "+d.Name.Name] = str(d.Type)
					continue
				}
				if recv := recvName(d.Recv.List[0].Type); ast.IsExported(recv) {
					api["method "+recv+"."+d.Name.Name] = str(d.Type)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							typeSurface(api, s, str)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								api[d.Tok.String()+" "+n.Name] = str(s.Type)
							}
						}
					}
				}
			}
		}
	}
	return api, pkg.Name == "main"
}

// buildContext selects files as go build does for goos/goarch with cgo
// off.
func buildContext(goos, goarch string) build.Context {
	ctx := build.Default
	ctx.GOOS, ctx.GOARCH, ctx.CgoEnabled = goos, goarch, false
	return ctx
}

func typeSurface(api map[string]string, s *ast.TypeSpec, str func(ast.Node) string) {
	name := s.Name.Name
	switch typ := s.Type.(type) {
	case *ast.StructType:
		api["type "+name] = "struct"
		for _, f := range typ.Fields.List {
			if len(f.Names) == 0 { // embedded
				if n := recvName(f.Type); ast.IsExported(n) {
					api["field "+name+"."+n] = str(f.Type)
				}
			}
			for _, n := range f.Names {
				if n.IsExported() {
					api["field "+name+"."+n.Name] = str(f.Type)
				}
			}
		}
	case *ast.InterfaceType:
		api["type "+name] = "interface"
		for _, m := range typ.Methods.List {
			for _, n := range m.Names {
				if n.IsExported() {
					api["method "+name+"."+n.Name] = str(m.Type)
				}
			}
			if len(m.Names) == 0 {
				api["embeds "+name+"."+str(m.Type)] = ""
			}
		}
	default:
		prefix := ""
		if s.Assign.IsValid() {
			prefix = "= "
		}
		api["type "+name] = prefix + str(s.Type)
	}
}

// recvName is the type name of a receiver or embedded field: T of *T,
// T[K], pkg.T.
func recvName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.SelectorExpr:
			return x.Sel.Name
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
