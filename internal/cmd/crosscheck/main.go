// Command crosscheck type-checks the module, tests included, for other
// systems and architectures, and assembles its assembly files for each,
// without compiling a standard library per target:
//
//	go run ./internal/cmd/crosscheck linux/riscv64 darwin/arm64 ...
//
// For each GOOS/GOARCH it asks go list which files build there
// (CGO_ENABLED=0), type-checks the standard library and the other modules
// from source with function bodies skipped (their declarations are all a
// dependent sees), type-checks every package of this module and its tests
// in full with the target's sizes, assembles each of the module's .s files
// with go tool asm, and holds every function declared without a body to a
// TEXT symbol in those files, as the compiler and linker would.
//
// make test's cross stage runs it on every target where nothing else in
// the gate compiles for that target; make crossfull builds them all for
// real. What a type-check leaves to the compiler (its back end, the
// linker's other symbols) is the same on every target for code without
// cgo, and is compiled for amd64 and arm64 in every run.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
)

func main() {
	pattern := flag.String("pkg", "./...", "the packages to check (a go list pattern)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: crosscheck [-pkg pattern] GOOS/GOARCH ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	// One target a core: each holds its own copy of the standard library's
	// declarations.
	sem := make(chan struct{}, max(1, runtime.NumCPU()))
	var wg sync.WaitGroup
	errs := make([]error, flag.NArg())
	for i, t := range flag.Args() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = checkTarget(t, *pattern)
		}()
	}
	wg.Wait()
	failed := false
	for i, t := range flag.Args() {
		if errs[i] != nil {
			failed = true
			fmt.Fprintf(os.Stderr, "crosscheck %s: %v\n", t, errs[i])
			continue
		}
		fmt.Printf("crosscheck %s: ok\n", t)
	}
	if failed {
		os.Exit(1)
	}
}

// listed is the part of go list -json that the check reads.
type listed struct {
	ImportPath string
	Name       string
	Dir        string
	Standard   bool
	GoFiles    []string
	SFiles     []string
	ImportMap  map[string]string
	Module     *struct {
		Main      bool
		GoVersion string
	}
	Error *struct {
		Err string
	}
}

// checkTarget checks pattern's packages and their tests for one
// GOOS/GOARCH.
func checkTarget(target, pattern string) error {
	goos, goarch, ok := strings.Cut(target, "/")
	if !ok {
		return fmt.Errorf("want GOOS/GOARCH")
	}
	env := append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	cmd := exec.Command("go", "list", "-e", "-deps", "-test",
		"-json=ImportPath,Name,Dir,Standard,GoFiles,SFiles,ImportMap,Module,Error", pattern)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list: %v: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	sizes := types.SizesFor("gc", goarch)
	if sizes == nil {
		return fmt.Errorf("go/types knows no sizes for %s", goarch)
	}
	fset := token.NewFileSet()
	checked := map[string]*types.Package{"unsafe": types.Unsafe}
	assembled := map[string]bool{} // directories: a package's test variants share its .s files
	var errs []error
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("go list's output: %v", err)
		}
		// go list -deps prints each package after its dependencies, so
		// everything p imports is checked when p comes.
		if p.ImportPath == "unsafe" || strings.HasSuffix(p.ImportPath, ".test") {
			continue
		}
		if p.Error != nil {
			errs = append(errs, fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err))
			continue
		}
		own := p.Module != nil && p.Module.Main
		pkg, err := check(fset, &p, own, sizes, checked)
		if err != nil {
			errs = append(errs, err)
			if pkg == nil {
				continue
			}
		}
		checked[p.ImportPath] = pkg
		if own && !assembled[p.Dir] {
			assembled[p.Dir] = true
			errs = append(errs, assemble(&p, env, goos, goarch)...)
		}
	}
	// A package and its test variants share files, and so their errors.
	seen := map[string]bool{}
	var uniq []error
	for _, err := range errs {
		for _, e := range strings.Split(err.Error(), "\n") {
			if !seen[e] {
				seen[e] = true
				uniq = append(uniq, errors.New(e))
			}
		}
	}
	return errors.Join(uniq...)
}

// check type-checks one package from source: in full when it is the
// module's own, its declarations only otherwise.
func check(fset *token.FileSet, p *listed, own bool, sizes types.Sizes, checked map[string]*types.Package) (*types.Package, error) {
	mode := parser.SkipObjectResolution
	if own {
		mode |= parser.ParseComments
	}
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, mode)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	var errs []error
	conf := types.Config{
		Importer: importerFunc(func(path string) (*types.Package, error) {
			if id, ok := p.ImportMap[path]; ok {
				path = id
			}
			if pkg := checked[path]; pkg != nil {
				return pkg, nil
			}
			return nil, fmt.Errorf("%s: not checked before its importer", path)
		}),
		Sizes:            sizes,
		IgnoreFuncBodies: !own,
		Error: func(err error) {
			if len(errs) < 10 {
				errs = append(errs, err)
			}
		},
	}
	if own && p.Module.GoVersion != "" {
		conf.GoVersion = "go" + p.Module.GoVersion
	}
	pkg, _ := conf.Check(p.ImportPath, fset, files, nil)
	if own && len(errs) == 0 {
		errs = append(errs, bodiless(fset, p, files)...)
	}
	return pkg, errors.Join(errs...)
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// assemble runs go tool asm on each of p's assembly files for the target,
// into a throwaway object, as go build would.
func assemble(p *listed, env []string, goos, goarch string) []error {
	if len(p.SFiles) == 0 {
		return nil
	}
	goroot, err := goRoot()
	if err != nil {
		return []error{fmt.Errorf("go env GOROOT: %v", err)}
	}
	inc := filepath.Join(goroot, "pkg", "include")
	tmp, err := os.MkdirTemp("", "crosscheck-")
	if err != nil {
		return []error{err}
	}
	defer os.RemoveAll(tmp)
	var errs []error
	for _, s := range p.SFiles {
		path, _, _ := strings.Cut(p.ImportPath, " ")
		cmd := exec.Command("go", "tool", "asm", "-p", path, "-I", inc,
			"-D", "GOOS_"+goos, "-D", "GOARCH_"+goarch, "-o", filepath.Join(tmp, "asm.o"), filepath.Join(p.Dir, s))
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("go tool asm %s: %v: %s", filepath.Join(path, s), err, bytes.TrimSpace(out)))
		}
	}
	return errs
}

// goRoot is the go command's GOROOT, asked once: textflag.h is in its
// pkg/include.
var goRoot = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	return strings.TrimSpace(string(out)), err
})

// textSym matches an assembly function's definition: TEXT ·name(SB).
var textSym = regexp.MustCompile(`(?m)^\s*TEXT\s+·([A-Za-z_][A-Za-z0-9_]*)(?:<[A-Za-z]+>)?\(SB\)`)

// bodiless fails each function that p declares without a body and its
// assembly files do not define: the compiler's "missing function body"
// (no .s files) or the linker's missing symbol.
func bodiless(fset *token.FileSet, p *listed, files []*ast.File) []error {
	defined := map[string]bool{}
	for _, s := range p.SFiles {
		b, err := os.ReadFile(filepath.Join(p.Dir, s))
		if err != nil {
			return []error{err}
		}
		for _, m := range textSym.FindAllSubmatch(b, -1) {
			defined[string(m[1])] = true
		}
	}
	var errs []error
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body != nil || fd.Recv != nil || defined[fd.Name.Name] || linknamed(f, fd) {
				continue
			}
			errs = append(errs, fmt.Errorf("%s: missing function body: %s has no body and no TEXT ·%s in the package's assembly for this target",
				fset.Position(fd.Pos()), fd.Name.Name, fd.Name.Name))
		}
	}
	return errs
}

// linknamed reports whether a //go:linkname directive in f names fd,
// whose body then lives in another package.
func linknamed(f *ast.File, fd *ast.FuncDecl) bool {
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if fields := strings.Fields(c.Text); len(fields) >= 2 && fields[0] == "//go:linkname" && fields[1] == fd.Name.Name {
				return true
			}
		}
	}
	return false
}
