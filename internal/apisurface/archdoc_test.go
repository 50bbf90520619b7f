package apisurface

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// archDocHeading opens the list of docs/ARCHITECTURE.md that TestArchDoc
// reads: one line per package, "- `pkg` → `a`, `b`" or "- `pkg` → nothing",
// up to the next line that is neither an item nor blank.
const archDocHeading = "### Imports, package by package"

var archDocLine = regexp.MustCompile("^- `([^`]+)` → (.+)$")

// TestArchDoc holds docs/ARCHITECTURE.md's list of imports to the code:
// for every package `go list ./...` finds (Linux, amd64, no cgo, tests
// left out), the goverbs packages it imports, no more and no fewer.
func TestArchDoc(t *testing.T) {
	root := moduleRoot(t)
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH (%v): TestArchDoc asks go list for the imports", err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseArchDoc(doc)
	if err != nil {
		t.Fatalf("docs/ARCHITECTURE.md: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-json", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0", "GOPROXY=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json ./...: %v\n%s", err, stderr.Bytes())
	}
	got, err := parseGoList(out)
	if err != nil {
		t.Fatalf("go list -json ./...: %v", err)
	}
	for _, msg := range diffArchDoc(want, got) {
		t.Error(msg)
	}
}

// parseArchDoc reads the list under archDocHeading: package → the goverbs
// packages it imports, sorted.
func parseArchDoc(doc []byte) (map[string][]string, error) {
	sc := bufio.NewScanner(bytes.NewReader(doc))
	in, found := false, false
	edges := map[string][]string{}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !in {
			in = line == archDocHeading
			found = found || in
			continue
		}
		if line == "" {
			continue // blank lines do not end the list: prose or a heading does
		}
		if !strings.HasPrefix(line, "- ") {
			break
		}
		m := archDocLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("line %d: %q is not \"- `pkg` → `a`, `b`\" or \"- `pkg` → nothing\"", n, line)
		}
		pkg, rest := m[1], m[2]
		if _, dup := edges[pkg]; dup {
			return nil, fmt.Errorf("line %d: %s listed twice", n, pkg)
		}
		imps := []string{}
		if rest != "nothing" {
			for _, f := range strings.Split(rest, ", ") {
				imp, ok1 := strings.CutPrefix(f, "`")
				imp, ok2 := strings.CutSuffix(imp, "`")
				if !ok1 || !ok2 || imp == "" || strings.Contains(imp, "`") {
					return nil, fmt.Errorf("line %d: %q: each import is one `pkg`, separated by \", \"", n, f)
				}
				imps = append(imps, imp)
			}
		}
		if !slices.IsSorted(imps) {
			return nil, fmt.Errorf("line %d: %s's imports are not sorted", n, pkg)
		}
		edges[pkg] = imps
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("no heading %q", archDocHeading)
	}
	if len(edges) == 0 {
		return nil, errors.New("no packages listed under " + archDocHeading)
	}
	return edges, nil
}

// parseGoList reads go list -json's stream of packages: each goverbs
// package, relative to the module, → the goverbs packages it imports.
func parseGoList(out []byte) (map[string][]string, error) {
	edges := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			return nil, fmt.Errorf("package %s is outside %s", p.ImportPath, module)
		}
		imps := []string{}
		for _, imp := range p.Imports {
			if own, ok := strings.CutPrefix(imp, module+"/"); ok {
				imps = append(imps, own)
			}
		}
		slices.Sort(imps)
		edges[rel] = imps
	}
	if len(edges) == 0 {
		return nil, errors.New("no packages")
	}
	return edges, nil
}

// diffArchDoc says, sorted, each package and edge that the document (want)
// and the code (got) do not share, naming the line to fix.
func diffArchDoc(want, got map[string][]string) []string {
	var msgs []string
	for pkg, imps := range got {
		doc, ok := want[pkg]
		if !ok {
			msgs = append(msgs, fmt.Sprintf("docs/ARCHITECTURE.md (%s) has no line for %s: add %s", archDocHeading, pkg, archDocItem(pkg, imps)))
			continue
		}
		for _, imp := range imps {
			if !slices.Contains(doc, imp) {
				msgs = append(msgs, fmt.Sprintf("docs/ARCHITECTURE.md: %s imports %s; its line lacks it: make it %s", pkg, imp, archDocItem(pkg, imps)))
			}
		}
		for _, imp := range doc {
			if !slices.Contains(imps, imp) {
				msgs = append(msgs, fmt.Sprintf("docs/ARCHITECTURE.md: %s's line says it imports %s, which it does not: make it %s", pkg, imp, archDocItem(pkg, imps)))
			}
		}
	}
	for pkg := range want {
		if _, ok := got[pkg]; !ok {
			msgs = append(msgs, fmt.Sprintf("docs/ARCHITECTURE.md lists %s, which go list does not find: remove its line", pkg))
		}
	}
	slices.Sort(msgs)
	return msgs
}

// archDocItem is pkg's line as the document should have it.
func archDocItem(pkg string, imps []string) string {
	if len(imps) == 0 {
		return "\"- `" + pkg + "` → nothing\""
	}
	return "\"- `" + pkg + "` → `" + strings.Join(imps, "`, `") + "`\""
}

// TestArchDocCatchesDrift proves the comparison can fail: an edge the
// document lacks, one it has too many, a package it lacks and one it
// lists that does not exist each give one message naming the line.
func TestArchDocCatchesDrift(t *testing.T) {
	doc := []byte("# x\n\n" + archDocHeading + "\n\n" +
		"- `cq` → `internal/errs`\n" +
		"- `provider/rxe` → `cq`, `uverbs`\n" +
		"- `gone` → nothing\n\nprose\n- `after` → nothing\n")
	want, err := parseArchDoc(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{
		"cq":           {"internal/errs", "internal/fdturn"},
		"provider/rxe": {"cq"},
		"uapi":         {},
	}
	msgs := diffArchDoc(want, got)
	for _, part := range []string{"cq imports internal/fdturn", "provider/rxe's line says it imports uverbs", "no line for uapi", "lists gone"} {
		if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, part) }) {
			t.Errorf("no message with %q in %q", part, msgs)
		}
	}
	if len(msgs) != 4 {
		t.Errorf("want 4 messages, got %d: %q", len(msgs), msgs)
	}
	if _, err := parseArchDoc([]byte(archDocHeading + "\n\n- `cq` → internal/errs\n")); err == nil {
		t.Error("an import without backquotes parsed")
	}
}
