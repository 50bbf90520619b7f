package uapi

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A layout is a struct's or union's size and its members' offsets, as C
// (testdata/layout.golden) or Go (goLayout, in zlayout_test.go) sees them.
type layout struct {
	Name    string // "struct ib_uverbs_attr"
	Size    uintptr
	Offsets []offset
}

type offset struct {
	Member string // offsetof's designator: "attr_id", "per_transport_caps.rc_odp_caps"
	Offset uintptr
}

var (
	reSizeof   = regexp.MustCompile(`^sizeof\(((?:struct|union) \w+)\) = (\d+)$`)
	reOffsetof = regexp.MustCompile(`^offsetof\(((?:struct|union) \w+), ([\w.]+)\) = (\d+)$`)
)

// readGolden parses the lines the generator's C program printed.
func readGolden(t *testing.T, path string) []layout {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []layout
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := reSizeof.FindStringSubmatch(line); m != nil {
			out = append(out, layout{Name: m[1], Size: atou(t, m[2])})
		} else if m := reOffsetof.FindStringSubmatch(line); m != nil && len(out) > 0 && out[len(out)-1].Name == m[1] {
			l := &out[len(out)-1]
			l.Offsets = append(l.Offsets, offset{m[2], atou(t, m[3])})
		} else if line != "" && line[0] != '#' {
			t.Fatalf("%s:%d: cannot read %q", path, n, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func atou(t *testing.T, s string) uintptr {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return uintptr(n)
}

// TestLayout holds every Go type to the size and offsets that gcc gave its
// C struct on x86-64. The Go types spell out all their padding, so they
// have those layouts on every GOARCH; the generator checks (gcc -m32)
// that 32-bit x86 C agrees, and 64-bit ABIs lay out fixed-width integers
// as x86-64 does. Nothing is skipped anywhere. The kernel's headers,
// rdma-core's mlx5dv.h and librdmacm's headers have a golden table and a
// Go map each.
func TestLayout(t *testing.T) {
	for _, g := range []struct {
		golden   string
		goLayout map[string]layout
	}{
		{"testdata/layout.golden", goLayout},
		{"testdata/mlx5dv.golden", goLayoutMlx5DV},
		{"testdata/rdmacm.golden", goLayoutRDMACM},
	} {
		t.Run(strings.TrimPrefix(g.golden, "testdata/"), func(t *testing.T) {
			golden := readGolden(t, g.golden)
			if len(golden) == 0 {
				t.Fatalf("%s holds no layouts", g.golden)
			}
			inGolden := map[string]bool{}
			for _, c := range golden {
				inGolden[c.Name] = true
				t.Run(c.Name, func(t *testing.T) {
					if diff := cmp.Diff(c, g.goLayout[c.Name]); diff != "" {
						t.Errorf("%s layout (-C +Go):\n%s", c.Name, diff)
					}
				})
			}
			for name := range g.goLayout {
				if !inGolden[name] {
					t.Errorf("%s: in the Go map but not in %s; run make generate", name, g.golden)
				}
			}
		})
	}
}
