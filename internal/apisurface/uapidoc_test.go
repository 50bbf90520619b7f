package apisurface

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsDoNotSendUsersToUAPI fails when the package doc of a public
// package, or the doc of any of its exported names, says "uapi.": uapi is
// generated and carries no compatibility promise, so a public package
// documents its API in its own terms (naming the kernel's C constant
// where that helps, not uapi's Go one). Every file of the package counts,
// whatever its build tags; tests do not.
func TestDocsDoNotSendUsersToUAPI(t *testing.T) {
	root := moduleRoot(t)
	for _, rel := range publicDirs(t, root) {
		if rel == "uapi" || strings.HasPrefix(rel, "uapi/") {
			continue
		}
		fset := token.NewFileSet()
		entries, err := os.ReadDir(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		pkgs := map[string][]*ast.File{} // by package name
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(root, rel, name), nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			pkgs[f.Name.Name] = append(pkgs[f.Name.Name], f)
		}
		for name, files := range pkgs {
			if name == "main" {
				continue
			}
			p, err := doc.NewFromFiles(fset, files, "example.com/"+rel)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what, text string) {
				if strings.Contains(text, "uapi.") {
					t.Errorf("%s: the doc of %s says uapi.; say it in %s's own terms:\n%s", rel, what, name, text)
				}
			}
			check("the package", p.Doc)
			values := func(prefix string, vs []*doc.Value) {
				for _, v := range vs {
					check(prefix+strings.Join(v.Names, ", "), v.Doc)
					for _, spec := range v.Decl.Specs {
						vs := spec.(*ast.ValueSpec)
						check(prefix+vs.Names[0].Name, vs.Doc.Text()+vs.Comment.Text())
					}
				}
			}
			funcs := func(prefix string, fs []*doc.Func) {
				for _, f := range fs {
					check(prefix+f.Name, f.Doc)
				}
			}
			values("", p.Consts)
			values("", p.Vars)
			funcs("", p.Funcs)
			for _, ty := range p.Types {
				check(ty.Name, ty.Doc)
				for _, spec := range ty.Decl.Specs {
					ts := spec.(*ast.TypeSpec)
					var fields *ast.FieldList
					switch x := ts.Type.(type) {
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
								check(ty.Name+"."+n.Name, fl.Doc.Text()+fl.Comment.Text())
							}
						}
					}
				}
				values(ty.Name+": ", ty.Consts)
				values(ty.Name+": ", ty.Vars)
				funcs("", ty.Funcs)
				funcs(ty.Name+".", ty.Methods)
			}
		}
	}
}
