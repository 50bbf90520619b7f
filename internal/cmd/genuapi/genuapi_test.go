package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUpToDate generates uapi into a temporary directory and compares it
// with the checked-in files: they must be what make generate writes now,
// byte for byte. It needs what the generator needs, and skips without it.
func TestUpToDate(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("genuapi runs on linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc:", err)
	}
	if _, err := os.Stat("/usr/include/rdma/ib_user_verbs.h"); err != nil {
		t.Skip("no RDMA uapi headers (Debian's linux-libc-dev):", err)
	}
	dir := t.TempDir()
	if err := generate(dir, "/usr/include", "gcc", false, false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"zconst.go", "ztypes.go", "zlayout_test.go", "testdata/layout.golden"} {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("../../../uapi", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if w, g := firstLine(want), firstLine(got); w != g {
				t.Skipf("uapi/%s was made from other headers:\n\t%s\nthese are:\n\t%s", name, w, g)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("uapi/%s is stale; run make generate (-checked in +generated):\n%s", name, diff)
			}
		})
	}
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}

func TestScan(t *testing.T) {
	src := `#ifndef GUARD_H
#define GUARD_H
#define ONE 1 /* a comment */
#define SHIFTED \
	(1UL << ONE)
#define FN(x) ((x) + 1)
enum colour {
	RED,	/* 0 */
	GREEN = 1 << 2,
	BLUE = FN(3),
};
enum { LONE = 7 };
struct box {
	__u32 w;
	RDMA_UAPI_PTR(void *, where);
	union { __u8 a; __u16 b; } u;
};
union either { __u32 x; };
#endif
`
	groups, tags, err := scan(header{path: "test.h"}, src)
	if err != nil {
		t.Fatal(err)
	}
	type group struct {
		Enum  string
		Names []string
		Text  map[string]string
	}
	var got []group
	for _, g := range groups {
		got = append(got, group{g.enum, g.names, g.text})
	}
	want := []group{
		{"", []string{"ONE", "SHIFTED"}, map[string]string{"ONE": "1", "SHIFTED": "(1UL << ONE)"}},
		{"enum colour", []string{"RED", "GREEN", "BLUE"}, map[string]string{"RED": "", "GREEN": "1 << 2", "BLUE": "FN(3)"}},
		{"enum", []string{"LONE"}, map[string]string{"LONE": "7"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("constants (-want +got):\n%s", diff)
	}
	wantTags := []tagDef{
		{header: "test.h", kind: "struct", tag: "box", ptrs: []string{"where"}},
		{header: "test.h", kind: "union", tag: "either"},
	}
	if diff := cmp.Diff(wantTags, tags, cmp.AllowUnexported(tagDef{})); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
}
