package mlx5

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"go/build/constraint"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/errs"
)

// insn is one instruction as go tool objdump prints it: its encoding in
// hex and its Go assembler text. An empty field is not checked.
type insn struct{ hex, asm string }

// barrierWant pins, per GOARCH, what each stub of mmio_$GOARCH.s
// assembles to (the table in mmio.go). Fences are pinned by encoding and
// mnemonic; mmioStore64 by its text, whose encoding (riscv64 compresses
// it) is the assembler's choice, except on mips64, which go tool objdump
// cannot disassemble: there the raw words are read from the ELF file.
// readFence absent: a Go function with an empty body (readfence_x86.go),
// inlined to nothing.
var barrierWant = map[string]map[string][]insn{
	"amd64": {
		"mmioStore64": {{"", "MOVQ 0x8(SP), AX"}, {"", "MOVQ 0x10(SP), BX"}, {"488918", "MOVQ BX, 0(AX)"}, {"c3", "RET"}},
		"dmaFence":    {{"c3", "RET"}},
		"wcFence":     {{"0faef8", "SFENCE"}, {"c3", "RET"}},
	},
	"386": {
		"mmioStore64": {{"", "MOVL 0x4(SP), AX"}, {"", "MOVQ 0x8(SP), X0"}, {"660fd600", "MOVQ X0, 0(AX)"}, {"c3", "RET"}},
		"dmaFence":    {{"c3", "RET"}},
		"wcFence":     {{"f083042400", "LOCK ADDL $0x0, 0(SP)"}, {"c3", "RET"}},
	},
	"arm64": {
		"mmioStore64": {{"", "MOVD 8(RSP), R0"}, {"", "MOVD 16(RSP), R1"}, {"f9000001", "MOVD R1, (R0)"}, {"d65f03c0", "RET"}},
		"dmaFence":    {{"d50332bf", "DMB $2"}, {"d65f03c0", "RET"}},  // dmb oshst
		"readFence":   {{"d50331bf", "DMB $1"}, {"d65f03c0", "RET"}},  // dmb oshld
		"wcFence":     {{"d5033e9f", "DSB $14"}, {"d65f03c0", "RET"}}, // dsb st
	},
	"ppc64":   ppc64Want,
	"ppc64le": ppc64Want,
	"riscv64": {
		"mmioStore64": {{"", "MOV 8(X2), X10"}, {"", "MOV 16(X2), X11"}, {"", "MOV X11, (X10)"}, {"00008067", "RET"}},
		"dmaFence":    {{"0550000f", "FENCE"}, {"00008067", "RET"}}, // fence ow,ow
		"readFence":   {{"0aa0000f", "FENCE"}, {"00008067", "RET"}}, // fence ir,ir
		"wcFence":     {{"0550000f", "FENCE"}, {"00008067", "RET"}}, // fence ow,ow
	},
	"loong64": {
		"mmioStore64": {{"", "MOVV 8(R3), R4"}, {"", "MOVV 16(R3), R5"}, {"29c00085", "MOVV R5, 0(R4)"}, {"4c000020", "RET"}},
		"dmaFence":    {{"38720000", "DBAR"}, {"4c000020", "RET"}}, // dbar 0
		"readFence":   {{"38720000", "DBAR"}, {"4c000020", "RET"}},
		"wcFence":     {{"38720000", "DBAR"}, {"4c000020", "RET"}},
	},
	"mips64":   mips64Want,
	"mips64le": mips64Want,
}

var ppc64Want = map[string][]insn{
	"mmioStore64": {{"", "MOVD 32(R1),R3"}, {"", "MOVD 40(R1),R4"}, {"f8830000", "MOVD R4,0(R3)"}, {"4e800020", "RET"}},
	"dmaFence":    {{"7c0004ac", "HWSYNC"}, {"4e800020", "RET"}},
	"readFence":   {{"7c2004ac", "LWSYNC"}, {"4e800020", "RET"}},
	"wcFence":     {{"7c0004ac", "HWSYNC"}, {"4e800020", "RET"}},
}

// mips64Want: raw words (go tool objdump has no MIPS disassembler); the
// assembler text is for the reader. Trailing zero words (the NOP in the
// JR's delay slot, alignment) are dropped.
var mips64Want = map[string][]insn{
	"mmioStore64": {{"dfa10008", "ld r1, 8(sp)"}, {"dfa20010", "ld r2, 16(sp)"}, {"fc220000", "sd r2, 0(r1)"}, {"03e00008", "jr ra"}},
	"dmaFence":    {{"0000000f", "sync"}, {"03e00008", "jr ra"}},
	"readFence":   {{"0000000f", "sync"}, {"03e00008", "jr ra"}},
	"wcFence":     {{"0000000f", "sync"}, {"03e00008", "jr ra"}},
}

// linuxArches are the GOARCHes Go supports on Linux.
var linuxArches = []string{"386", "amd64", "arm", "arm64", "loong64", "mips", "mipsle", "mips64", "mips64le",
	"ppc64", "ppc64le", "riscv64", "s390x"}

const modulePath = "github.com/goverbs/goverbs"

var barrierFuncs = []string{"mmioStore64", "dmaFence", "readFence", "wcFence"}

// TestBarrierFilesCoverArches: the build lines agree with barrierWant. A
// GOARCH with stubs (mmio_asm.go) has a readFence and a pinned table; every
// other one gets mmio_other.go, and with it the refusal at Open.
func TestBarrierFilesCoverArches(t *testing.T) {
	asm, other := buildLine(t, "mmio_asm.go"), buildLine(t, "mmio_other.go")
	rfX86, rfAsm := buildLine(t, "readfence_x86.go"), buildLine(t, "readfence_asm.go")
	for _, arch := range linuxArches {
		tag := func(tag string) bool { return tag == arch || tag == "linux" }
		_, pinned := barrierWant[arch]
		if asm.Eval(tag) != pinned {
			t.Errorf("GOARCH=%s: mmio_asm.go builds: %v; barrierWant has it: %v", arch, asm.Eval(tag), pinned)
		}
		if other.Eval(tag) == asm.Eval(tag) {
			t.Errorf("GOARCH=%s: mmio_other.go and mmio_asm.go both build, or neither", arch)
		}
		if n := btoi(rfX86.Eval(tag)) + btoi(rfAsm.Eval(tag)); pinned && n != 1 {
			t.Errorf("GOARCH=%s: %d readFence files build, want 1", arch, n)
		}
	}
}

// TestRefusal: the error Open returns on a GOARCH without barriers names
// it, says why, and is ErrNotSupported.
func TestRefusal(t *testing.T) {
	for _, arch := range []string{"s390x", "arm", "mips", "mipsle", "wasm"} {
		err := refusal(arch)
		if !errors.Is(err, errs.ErrNotSupported) {
			t.Errorf("%s: %v is not ErrNotSupported", arch, err)
		}
		if !strings.Contains(err.Error(), "GOARCH="+arch+" (") {
			t.Errorf("%s: %q does not name the GOARCH", arch, err)
		}
		t.Log(err)
	}
}

// TestBarrierInstructions builds a program calling the stubs for every
// GOARCH in barrierWant and checks, with go tool objdump, the
// instructions each stub assembles to. It needs the go command and the
// source tree, so it skips in the VM harness, and it runs only on the
// host's own GOARCH (make unit), not under make unit32 or bigendian.
func TestBarrierInstructions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build; skipped with -short")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root := findModuleRoot(t)
	host, err := exec.Command(goCmd, "env", "GOHOSTOS", "GOHOSTARCH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	if got, want := runtime.GOOS+"/"+runtime.GOARCH, strings.Replace(strings.TrimSpace(string(host)), "\n", "/", 1); got != want {
		t.Skipf("runs on the host's own GOOS/GOARCH (%s), not %s", want, got)
	}

	// An overlay adds, for the build only, an exported caller to the
	// package and a main package calling it, so that the linker keeps
	// every stub.
	tmp := t.TempDir()
	probe := filepath.Join(tmp, "probe.go")
	mainGo := filepath.Join(tmp, "main.go")
	writeFile(t, probe, "package mlx5\n\nfunc BarrierProbe() { dmaFence(); readFence(); wcFence(); mmioStore64(nil, 0) }\n")
	writeFile(t, mainGo, "package main\n\nimport \""+modulePath+"/provider/mlx5\"\n\nfunc main() { mlx5.BarrierProbe() }\n")
	dir := filepath.Join(root, "provider", "mlx5")
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {
		filepath.Join(dir, "zz_barrierprobe.go"):         probe,
		filepath.Join(dir, "zz_barrierprobe", "main.go"): mainGo,
	}})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(tmp, "overlay.json")
	writeFile(t, overlayFile, string(overlay))

	for _, arch := range slices.Sorted(maps.Keys(barrierWant)) {
		t.Run(arch, func(t *testing.T) {
			t.Parallel()
			bin := filepath.Join(tmp, "probe."+arch)
			build := exec.Command(goCmd, "build", "-overlay", overlayFile, "-o", bin, "./provider/mlx5/zz_barrierprobe")
			build.Dir = root
			build.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0", "GOFLAGS=")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("GOARCH=%s go build: %v\n%s", arch, err, out)
			}
			var got map[string][]insn
			if strings.HasPrefix(arch, "mips") {
				got = elfWords(t, bin)
			} else {
				got = objdump(t, goCmd, bin)
			}
			for _, fn := range barrierFuncs {
				want := barrierWant[arch][fn]
				g := got[fn]
				if len(g) == len(want) {
					for i := range want { // unchecked fields compare equal
						if want[i].hex == "" {
							g[i].hex = ""
						}
						if want[i].asm == "" || strings.HasPrefix(arch, "mips") {
							g[i].asm = want[i].asm
						}
					}
				}
				if diff := cmp.Diff(want, g, cmp.AllowUnexported(insn{})); diff != "" {
					t.Errorf("GOARCH=%s %s (-want +got):\n%s", arch, fn, diff)
				}
			}
		})
	}
}

// objdump returns the instructions of the stubs in bin, by go tool
// objdump, without trailing zero words (arm64's alignment padding).
func objdump(t *testing.T, goCmd, bin string) map[string][]insn {
	t.Helper()
	re := `^` + regexp.QuoteMeta(modulePath+"/provider/mlx5.") + `(` + strings.Join(barrierFuncs, "|") + `)(\.abi0)?$`
	out, err := exec.Command(goCmd, "tool", "objdump", "-s", re, bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool objdump: %v\n%s", err, out)
	}
	got := map[string][]insn{}
	var fn string
	for line := range strings.Lines(string(out)) {
		if name, ok := strings.CutPrefix(line, "TEXT "); ok {
			name, _, _ = strings.Cut(name, "(SB)")
			name = strings.TrimSuffix(strings.TrimPrefix(name, modulePath+"/provider/mlx5."), ".abi0")
			fn = name
			got[fn] = []insn{}
			continue
		}
		// "  file.s:9\t0x48a460\t\t488b442408\t\tMOVQ 0x8(SP), AX\t"
		var f []string
		for _, s := range strings.Split(line, "\t") {
			if s = strings.TrimSpace(s); s != "" {
				f = append(f, s)
			}
		}
		if len(f) == 4 && fn != "" {
			got[fn] = append(got[fn], insn{f[2], f[3]})
		}
	}
	for fn, ins := range got {
		for len(ins) > 0 && strings.Trim(ins[len(ins)-1].hex, "0") == "" {
			ins = ins[:len(ins)-1]
		}
		got[fn] = ins
	}
	return got
}

// elfWords returns the stubs in bin as 4-byte instruction words read from
// the ELF file, for an architecture go tool objdump cannot disassemble,
// without trailing zero words.
func elfWords(t *testing.T, bin string) map[string][]insn {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]insn{}
	for _, s := range syms {
		name, ok := strings.CutPrefix(s.Name, modulePath+"/provider/mlx5.")
		name = strings.TrimSuffix(name, ".abi0")
		if !ok || !slices.Contains(barrierFuncs, name) || int(s.Section) >= len(f.Sections) {
			continue
		}
		sec := f.Sections[s.Section]
		b := make([]byte, s.Size)
		if _, err := sec.ReadAt(b, int64(s.Value-sec.Addr)); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		b = bytes.TrimRight(b, "\x00")
		var ins []insn
		for i := 0; i < len(b); i += 4 {
			w := make([]byte, 4)
			copy(w, b[i:])
			ins = append(ins, insn{hex: fmt.Sprintf("%08x", f.ByteOrder.Uint32(w))})
		}
		got[name] = ins
	}
	return got
}

func buildLine(t *testing.T, file string) constraint.Expr {
	t.Helper()
	src, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("no source tree (%v): the VM harness runs test binaries alone", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(src)) {
		if constraint.IsGoBuild(line) {
			e, err := constraint.Parse(strings.TrimSpace(line))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			return e
		}
	}
	t.Fatalf("%s: no //go:build line", file)
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func writeFile(t *testing.T, name, s string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// findModuleRoot returns the directory holding go.mod above the test's,
// or skips: the VM harness runs test binaries without the source tree.
func findModuleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Skip("no source tree (go.mod) above the test")
		}
		dir = up
	}
}
