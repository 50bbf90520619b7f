package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUpToDate generates uapi into a temporary directory and compares it
// with the checked-in files: they must be what make generate writes now,
// byte for byte. Its inputs are the pinned packages, read from the cache
// where make pins (a step of make test and make check) put them, so it
// gives the same answer on every machine and needs no network: it never
// downloads. Where it cannot run (no gcc or dpkg-deb, or the packages not
// in the cache) it skips, saying why, except in CI ($CI set), where it
// fails: there stale files must never pass unnoticed.
func TestUpToDate(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("genuapi runs on linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	cannot := t.Skipf
	if os.Getenv("CI") != "" {
		cannot = t.Fatalf
	}
	for _, tool := range []string{"gcc", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			cannot("cannot check uapi against its pinned headers: genuapi needs %s: %v", tool, err)
		}
	}
	o := options{out: t.TempDir(), cc: "gcc"}
	for i, deb := range []*string{&o.kernelDeb, &o.rdmaCoreDeb, &o.rdmacmDeb} {
		p, err := pins[i].cached()
		if err != nil {
			cannot("cannot check uapi against its pinned headers: %v", err)
		}
		*deb = p
	}
	if err := generate(o); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		"zconst.go",
		"ztypes.go",
		"zlayout_test.go",
		"znested.go",
		"testdata/layout.golden",
		"zmlx5dv.go",
		"zmlx5dv_layout_test.go",
		"testdata/mlx5dv.golden",
		"zrdmacm.go",
		"zrdmacm_layout_test.go",
		"testdata/rdmacm.golden",
	} {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("../../../uapi", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(o.out, name))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("uapi/%s is stale; run make generate (-checked in +generated):\n%s", name, diff)
			}
		})
	}
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
