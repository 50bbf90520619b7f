package main

import (
	"fmt"
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
// The mlx5dv files need rdma-core's libibverbs-dev as well, which it
// downloads as make generate does; where that fails (no network, no
// apt-get), it checks the kernel's files and skips the mlx5dv ones,
// saying why.
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
	o := options{out: t.TempDir(), inc: "/usr/include", cc: "gcc"}
	var noMlx5DV string
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		noMlx5DV = fmt.Sprintf("no dpkg-deb to unpack %s for mlx5dv.h, so this file is not checked: %v", rdmaCorePackage, err)
	} else if deb, err := downloadRDMACore(); err != nil {
		noMlx5DV = fmt.Sprintf("cannot obtain %s %s for mlx5dv.h, so this file is not checked:\n%v", rdmaCorePackage, rdmaCoreVersion, err)
	} else {
		o.rdmaCoreDeb = deb
	}
	if err := generate(o); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name   string
		mlx5dv bool
	}{
		{"zconst.go", false},
		{"ztypes.go", false},
		{"zlayout_test.go", false},
		{"znested.go", false},
		{"testdata/layout.golden", false},
		{"zmlx5dv.go", true},
		{"zmlx5dv_layout_test.go", true},
		{"testdata/mlx5dv.golden", true},
	} {
		t.Run(f.name, func(t *testing.T) {
			if f.mlx5dv && noMlx5DV != "" {
				t.Skip(noMlx5DV)
			}
			want, err := os.ReadFile(filepath.Join("../../../uapi", f.name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(o.out, f.name))
			if err != nil {
				t.Fatal(err)
			}
			if w, g := firstLine(want), firstLine(got); w != g {
				t.Skipf("uapi/%s was made from other headers:\n\t%s\nthese are:\n\t%s", f.name, w, g)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("uapi/%s is stale; run make generate (-checked in +generated):\n%s", f.name, diff)
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
