package apisurface

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDocsDoNotSendUsersToUAPI fails when the package doc of a public
// package (the golden ones: see notGolden), or the doc of any of its
// exported names, says "uapi.": uapi is generated and carries no
// compatibility promise, so a public package documents its API in its own
// terms (naming the kernel's C constant where that helps, not uapi's Go
// one). A constant's value may still be uapi's: that is source, not doc.
func TestDocsDoNotSendUsersToUAPI(t *testing.T) {
	root := moduleRoot(t)
	for _, rel := range goldenDirs(t, root) {
		for _, m := range uapiDocMentions(t, filepath.Join(root, rel)) {
			t.Errorf("%s: %s", rel, m)
		}
	}
}

// TestUAPIDocMentionsSeesStubs proves the check can fail, wherever the
// mention is: in a *_other.go stub's doc of a name the Linux file also
// declares, a field's, a grouped constant's, a method's, the package's.
// Unexported names and tests do not count.
func TestUAPIDocMentionsSeesStubs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("doc.go", "// Package p is like uapi.P.\npackage p\n")
	write("a_linux.go", "package p\n\n// F does it.\nfunc F() {}\n\n// T is a thing.\ntype T struct {\n\tA int // see uapi.A\n\ta int // see uapi.a\n}\n")
	write("a_other.go", "//go:build !linux\n\npackage p\n\n// F is uapi.F.\nfunc F() {}\n\n// T is a thing.\ntype T struct{ A int }\n")
	write("b.go", "package p\n\n// Cs.\nconst (\n\t// C is uapi.C.\n\tC = 1\n\tD = 2 // uapi.D\n)\n\n// M is uapi.M.\nfunc (T) M() {}\n\n// g is uapi.g.\nfunc g() {}\n")
	write("b_test.go", "package p\n\n// X is uapi.X.\nfunc X() {}\n")
	got := uapiDocMentions(t, dir)
	var names []string
	for _, m := range got {
		name, _, _ := strings.Cut(m, ":")
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"C", "D", "F", "T.A", "T.M", "package p"}; !slices.Equal(names, want) {
		t.Errorf("mentions of %v, want %v:\n%s", names, want, strings.Join(got, "\n"))
	}
}

// uapiDocMentions returns a line for each doc of the package in dir that
// says "uapi.": the package doc, or that of an exported name. It reads the
// files each of targets builds (tests left out) one target at a time, so
// that a stub's doc counts as much as the Linux file's (go/doc keeps one
// of two declarations of a name).
func uapiDocMentions(t *testing.T, dir string) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	report := func(what, text string) {
		if !strings.Contains(text, "uapi.") {
			return
		}
		m := what + ": says uapi.; say it in the package's own terms: " + strings.TrimSpace(text)
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		ctx := buildContext(tg.goos, tg.goarch)
		fset := token.NewFileSet()
		var files []*ast.File
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			if ok, err := ctx.MatchFile(dir, name); err != nil {
				t.Fatal(err)
			} else if !ok {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		if len(files) == 0 || files[0].Name.Name == "main" {
			continue
		}
		p, err := doc.NewFromFiles(fset, files, "example.com/"+filepath.Base(dir))
		if err != nil {
			t.Fatal(err)
		}
		report("package "+p.Name, p.Doc)
		values := func(vs []*doc.Value) {
			for _, v := range vs {
				report(strings.Join(v.Names, ", "), v.Doc)
				for _, spec := range v.Decl.Specs {
					vs := spec.(*ast.ValueSpec)
					for _, n := range vs.Names {
						if n.IsExported() {
							report(n.Name, vs.Doc.Text()+vs.Comment.Text())
						}
					}
				}
			}
		}
		funcs := func(prefix string, fs []*doc.Func) {
			for _, f := range fs {
				report(prefix+f.Name, f.Doc)
			}
		}
		values(p.Consts)
		values(p.Vars)
		funcs("", p.Funcs)
		for _, ty := range p.Types {
			report(ty.Name, ty.Doc)
			for _, spec := range ty.Decl.Specs {
				var fields *ast.FieldList
				switch x := spec.(*ast.TypeSpec).Type.(type) {
				case *ast.StructType:
					fields = x.Fields
				case *ast.InterfaceType:
					fields = x.Methods
				}
				if fields == nil {
					continue
				}
				for _, fl := range fields.List {
					for _, n := range fl.Names {
						if n.IsExported() {
							report(ty.Name+"."+n.Name, fl.Doc.Text()+fl.Comment.Text())
						}
					}
				}
			}
			values(ty.Consts)
			values(ty.Vars)
			funcs("", ty.Funcs)
			funcs(ty.Name+".", ty.Methods)
		}
	}
	return out
}
