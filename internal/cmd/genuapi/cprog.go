package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The C side: every value and every size and offset in uapi comes from
// the C compiler, through small programs that genuapi writes into a
// temporary directory, compiles and runs.

// A cc compiles C against the headers of one unit.
type cc struct {
	path    string   // the compiler, "gcc"
	flags   []string // include flags
	kinc    string   // the kernel's headers (linux-libc-dev's usr/include)
	dir     string   // the temporary directory
	headers []header // what every program includes
}

// prelude is the #include lines every program starts with.
func (c *cc) prelude() string { return "#include <stdio.h>\n" + c.headerIncludes() }

// headerIncludes includes stddef.h (offsetof) and the headers.
func (c *cc) headerIncludes() string {
	var b strings.Builder
	b.WriteString("#include <stddef.h>\n")
	for _, h := range c.headers {
		fmt.Fprintf(&b, "#include <%s>\n", h.path)
	}
	return b.String()
}

// run runs the compiler with args in c.dir and returns its diagnostics.
func (c *cc) run(args ...string) (string, error) {
	cmd := exec.Command(c.path, append(append([]string{}, c.flags...), args...)...)
	cmd.Dir = c.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (c *cc) write(name, src string) error {
	return os.WriteFile(filepath.Join(c.dir, name), []byte(src), 0o644)
}

// caseProbe is a statement that compiles only if x is an integer constant
// expression: a case label must be one. Strings, floats, types and
// expressions that need a declaration fail.
func caseProbe(x string) string { return fmt.Sprintf("\tswitch (0) { case (%s): ; }\n", x) }

var reErrLine = regexp.MustCompile(`(?m)^probe\.c:(\d+):\d+: error:`)

// integerConstants returns the names in order that the compiler accepts as
// integer constants. It compiles one probe for all of them; on errors it
// retries each name that an error points at on its own, so that a cascade
// of errors from one bad macro never costs a good one.
func (c *cc) integerConstants(names []string) ([]string, error) {
	bad := map[string]bool{}
	for {
		var b strings.Builder
		b.WriteString(c.prelude())
		b.WriteString("void probe(void)\n{\n")
		first := strings.Count(b.String(), "\n") + 1
		var lines []string // lines[i] is the name probed at line first+i
		for _, n := range names {
			if !bad[n] {
				b.WriteString(caseProbe(n))
				lines = append(lines, n)
			}
		}
		b.WriteString("}\n")
		if err := c.write("probe.c", b.String()); err != nil {
			return nil, err
		}
		out, err := c.run("-fsyntax-only", "-w", "probe.c")
		if err == nil {
			return lines, nil
		}
		found := false
		for _, m := range reErrLine.FindAllStringSubmatch(out, -1) {
			i, _ := strconv.Atoi(m[1])
			if i -= first; i < 0 || i >= len(lines) || bad[lines[i]] {
				continue
			}
			alone := c.prelude() + "void probe(void)\n{\n" + caseProbe(lines[i]) + "}\n"
			if err := c.write("one.c", alone); err != nil {
				return nil, err
			}
			if _, err := c.run("-fsyntax-only", "-w", "one.c"); err != nil {
				bad[lines[i]] = true
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%s: probe of the constants fails, and no single one is to blame:\n%s", c.path, out)
		}
	}
}

// A value is an integer constant as the compiler printed it.
type value struct {
	neg bool
	abs uint64
}

// program compiles and runs a C program that prints every constant's value
// and every layout's size and offsets. It returns the values, and the
// layout lines as printed (they become testdata/layout.golden).
func (c *cc) program(consts []string, mirrors []*mirror, offsets []nestedOffset) (map[string]value, []string, map[string]uint64, error) {
	var b strings.Builder
	b.WriteString(c.prelude())
	b.WriteString(`
static void value(const char *name, int neg, unsigned long long v)
{
	if (neg)
		printf("const %s -%llu\n", name, 0 - v);
	else
		printf("const %s %llu\n", name, v);
}

#define VALUE(x) value(#x, (x) < 0, (unsigned long long)(x))
#define SIZE(t) printf("sizeof(%s) = %zu\n", #t, sizeof(t))
#define OFFSET(t, m) printf("offsetof(%s, %s) = %zu\n", #t, #m, offsetof(t, m))

int main(void)
{
`)
	for _, n := range consts {
		fmt.Fprintf(&b, "\tVALUE(%s);\n", n)
	}
	for _, m := range mirrors {
		ct := m.kind + " " + m.tag
		fmt.Fprintf(&b, "\tSIZE(%s);\n", ct)
		for _, e := range m.layout {
			fmt.Fprintf(&b, "\tOFFSET(%s, %s);\n", ct, e.c)
		}
	}
	b.WriteString(nestedProgram(offsets))
	b.WriteString("\treturn 0;\n}\n")
	if err := c.write("values.c", b.String()); err != nil {
		return nil, nil, nil, err
	}
	if out, err := c.run("-w", "-o", "values", "values.c"); err != nil {
		return nil, nil, nil, fmt.Errorf("%s values.c: %v\n%s", c.path, err, out)
	}
	cmd := exec.Command(filepath.Join(c.dir, "values"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("values: %v", err)
	}
	vals := map[string]value{}
	nested := map[string]uint64{}
	var layout []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "nested" {
			if nested[f[1]], err = strconv.ParseUint(f[2], 10, 64); err != nil {
				return nil, nil, nil, fmt.Errorf("values: %q: %v", line, err)
			}
			continue
		}
		if len(f) != 3 || f[0] != "const" {
			layout = append(layout, line)
			continue
		}
		v := value{neg: strings.HasPrefix(f[2], "-")}
		if v.abs, err = strconv.ParseUint(strings.TrimPrefix(f[2], "-"), 10, 64); err != nil {
			return nil, nil, nil, fmt.Errorf("values: %q: %v", line, err)
		}
		vals[f[1]] = v
	}
	return vals, layout, nested, sc.Err()
}

// debugObject compiles a file that includes the headers, with debug
// information, and returns the object's path: its DWARF describes every
// struct and union they define.
func (c *cc) debugObject() (string, error) {
	if err := c.write("types.c", c.prelude()); err != nil {
		return "", err
	}
	if out, err := c.run("-g", "-fno-eliminate-unused-debug-types", "-c", "-o", "types.o", "types.c"); err != nil {
		return "", fmt.Errorf("%s types.c: %v\n%s", c.path, err, out)
	}
	return filepath.Join(c.dir, "types.o"), nil
}

// check32 compiles, for 32-bit x86 (-m32), assertions that every size and
// offset is what the host's C compiler printed. uapi's structs do not
// depend on the architecture (explicit padding, no pointers or longs), so
// they are right on 32-bit only if the C layouts are the same there. It
// reports false when the compiler cannot build for -m32 at all.
func (c *cc) check32(layout []string) (bool, error) {
	var b strings.Builder
	b.WriteString(c.headerIncludes()) // no stdio.h, but the headers may include libc's
	for _, l := range layout {
		lhs, rhs, ok := strings.Cut(l, " = ")
		if !ok {
			return false, fmt.Errorf("layout line %q", l)
		}
		fmt.Fprintf(&b, "_Static_assert(%s == %s, %q);\n", lhs, rhs, l)
	}
	if err := c.write("check32.c", b.String()); err != nil {
		return false, err
	}
	// x86's asm/ uapi headers serve 32 and 64 bits alike; the 64-bit
	// multiarch directory stands in for a missing 32-bit one.
	// So do libc's, but for gnu/stubs-32.h, which only lists the
	// functions that 32-bit glibc lacks: an empty one stands in for it.
	asm := filepath.Join(c.kinc, "x86_64-linux-gnu")
	libc := "/usr/include/x86_64-linux-gnu"
	stubs := filepath.Join(c.dir, "stubs32")
	if err := os.MkdirAll(filepath.Join(stubs, "gnu"), 0o755); err != nil {
		return false, err
	}
	if err := c.write(filepath.Join("stubs32", "gnu", "stubs-32.h"), ""); err != nil {
		return false, err
	}
	if out, err := c.run("-m32", "-idirafter", asm, "-idirafter", libc, "-idirafter", stubs, "-fsyntax-only", "-w", "check32.c"); err != nil {
		if strings.Contains(out, "static assertion failed") {
			return true, fmt.Errorf("layouts differ on 32-bit x86:\n%s", out)
		}
		return false, nil
	}
	return true, nil
}
