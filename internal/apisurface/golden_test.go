package apisurface

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/api.txt from the sources")

// golden are the packages whose exported API testdata/api.txt holds:
// what users import. uapi (generated, held by genuapi's TestUpToDate)
// carries no compatibility promise and is left out; the providers export
// nothing (TestProvidersExportNothing).
var golden = []string{"cq", "rdmacm", "uverbs"}

// TestGoldenAPI fails on any exported name of a user's package, or any
// change of its signature, that testdata/api.txt does not list: a change
// of the public API is a deliberate edit of that file (go test
// ./internal/apisurface -run GoldenAPI -update), seen in review.
func TestGoldenAPI(t *testing.T) {
	root := moduleRoot(t)
	var lines []string
	for _, rel := range golden {
		api, _ := surface(t, filepath.Join(root, rel), "linux", "amd64")
		for k, v := range api {
			lines = append(lines, strings.TrimSpace(rel+": "+k+" "+v))
		}
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", "api.txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")); diff != "" {
		t.Errorf("the exported API differs from %s (-listed +now); if the change is meant, rerun with -update and commit the file:\n%s", path, diff)
	}
}
