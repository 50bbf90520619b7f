package apisurface

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// coverageName is a Go name as docs/COVERAGE.md's goverbs column writes
// it: `Name`, `Type.Method`, `pkg.Name` or `pkg.Type.Field`.
var coverageName = regexp.MustCompile(`^(?:(cq|uverbs|rdmacm|rdmanet)\.)?([A-Z][A-Za-z0-9]*)(?:\.([A-Z][A-Za-z0-9]*))?$`)

var coverageTest = regexp.MustCompile("`(Test[A-Za-z0-9_]+)`")

// TestCoverageNames keeps docs/COVERAGE.md true to the code: every Go name
// in its goverbs column is in the public API (testdata/api.txt), and every
// test its last column names exists.
func TestCoverageNames(t *testing.T) {
	root := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "COVERAGE.md"))
	if err != nil {
		t.Fatal(err)
	}
	api, err := os.ReadFile(filepath.Join(root, "internal", "apisurface", "testdata", "api.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// known holds "pkg: Name" and "pkg: Type.Member" for every line of
	// the golden, and the bare names and members too, for cells that omit
	// the package or the type.
	known := map[string]bool{}
	for _, line := range strings.Split(string(api), "\n") {
		pkg, rest, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		name := f[1]
		known[pkg+": "+name] = true
		known[name] = true
		if typ, member, ok := strings.Cut(name, "."); ok {
			known[typ] = true
			known[member] = true // a cell's "Arm" after "SRQ.PostRecv"
		}
	}
	tests := testFuncs(t, root)

	rows := 0
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		// | # | operation | API | rxe 6.1 | rxe 6.12 | mlx5 | goverbs | proven by |
		if len(cells) != 10 || strings.TrimSpace(cells[1]) == "#" || strings.HasPrefix(strings.TrimSpace(cells[1]), "-") {
			continue
		}
		rows++
		for _, quoted := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[7], -1) {
			m := coverageName.FindStringSubmatch(quoted[1])
			if m == nil {
				continue // a command line or a file, not a Go name
			}
			name := m[2]
			if m[3] != "" {
				name += "." + m[3]
			}
			key := name
			if m[1] != "" {
				key = m[1] + ": " + name
			}
			if !known[key] {
				t.Errorf("docs/COVERAGE.md row %s names `%s`, which is not in the public API", strings.TrimSpace(cells[1]), quoted[1])
			}
		}
		for _, m := range coverageTest.FindAllStringSubmatch(cells[8], -1) {
			if !tests[m[1]] {
				t.Errorf("docs/COVERAGE.md row %s cites %s, which no test file defines", strings.TrimSpace(cells[1]), m[1])
			}
		}
	}
	if rows < 80 {
		t.Errorf("read %d rows of docs/COVERAGE.md's table; its layout changed", rows)
	}
}

// testFuncs returns the names of the module's test functions.
func testFuncs(t *testing.T, root string) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
