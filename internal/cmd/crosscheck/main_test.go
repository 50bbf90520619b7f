package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCheckTarget: what builds passes, and each kind of failure a real
// build would meet fails with the compiler's or assembler's reason.
func TestCheckTarget(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("crosscheck runs go list and go tool asm: %v (the VM guests have no Go toolchain)", err)
	}
	t.Chdir("testdata/mod")
	for _, c := range []struct {
		target, pkg string
		want        string // "" for no error
	}{
		{"linux/amd64", "./good/", ""},
		{"linux/arm64", "./good/", ""},
		{"linux/riscv64", "./good/", ""},
		{"windows/386", "./good/", ""},
		{"linux/amd64", "./wide/", ""},
		{"linux/arm", "./wide/", "overflows"},
		{"linux/amd64", "./noasm/", "missing function body: Missing"},
		{"linux/amd64", "./badasm/", `unrecognized instruction "BOGUS"`},
		{"linux/arm64", "./badasm/", "missing function body: Fence"},
		{"linux/amd64", "./nonesuch/", "nonesuch"},
		{"linux/nonesuch", "./good/", "nonesuch"},
	} {
		err := checkTarget(c.target, c.pkg)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: %v; want no error", c.target, c.pkg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s: %v; want an error with %q", c.target, c.pkg, err, c.want)
		}
	}
}
