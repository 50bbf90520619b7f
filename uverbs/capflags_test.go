package uverbs_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

func TestCapString(t *testing.T) {
	for _, tc := range []struct {
		got  string
		want string
	}{
		{uverbs.DeviceCap(0).String(), "0"},
		{uverbs.DeviceCapSRQResize.String(), "SRQ_RESIZE"},
		{(uverbs.DeviceCapResizeMaxWR | uverbs.DeviceCapXRC | uverbs.DeviceCapPCIWriteEndPadding).String(), "RESIZE_MAX_WR|XRC|PCI_WRITE_END_PADDING"},
		{(uverbs.DeviceCapPortActiveEvent | 0x200 | 1<<63).String(), "0x200|PORT_ACTIVE_EVENT|0x8000000000000000"},
		{(uverbs.DeviceCapFlushGlobal | uverbs.DeviceCapFlushPersistent | uverbs.DeviceCapAtomicWrite | 1<<37).String(), "0x2000000000|FLUSH_GLOBAL|FLUSH_PERSISTENT|ATOMIC_WRITE"},
		{uverbs.PortCap(0).String(), "0"},
		{(uverbs.PortCapCMSup | uverbs.PortCapIPBasedGIDs).String(), "CM_SUP|IP_BASED_GIDS"},
		{(uverbs.PortCapSM | 1).String(), "0x1|SM"},
		{uverbs.PortCapHierarchyInfoSup.String(), "HIERARCHY_INFO_SUP"},
		{uverbs.RawPacketCap(0).String(), "0"},
		{(uverbs.RawPacketCapCVLANStripping | uverbs.RawPacketCapDelayDrop | 0x10).String(), "CVLAN_STRIPPING|DELAY_DROP|0x10"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestCapHas(t *testing.T) {
	c := uverbs.DeviceCapSRQResize | uverbs.DeviceCapXRC
	if !c.Has(uverbs.DeviceCapSRQResize) || !c.Has(uverbs.DeviceCapSRQResize|uverbs.DeviceCapXRC) || !c.Has(0) {
		t.Errorf("%v lacks what it holds", c)
	}
	if c.Has(uverbs.DeviceCapMemWindow) || c.Has(uverbs.DeviceCapXRC|uverbs.DeviceCapMemWindow) {
		t.Errorf("%v holds what it lacks", c)
	}
	if p := uverbs.PortCapCMSup; !p.Has(uverbs.PortCapCMSup) || p.Has(uverbs.PortCapSM) {
		t.Errorf("PortCap %v: Has is wrong", p)
	}
	if r := uverbs.RawPacketCapIPCsum; !r.Has(uverbs.RawPacketCapIPCsum) || r.Has(uverbs.RawPacketCapScatterFCS) {
		t.Errorf("RawPacketCap %v: Has is wrong", r)
	}
}

// TestCapNamesAreTheKernels holds capflags.go's line comments, the names
// stringer gives each bit, to the kernel's: each public constant is
// uapi.<PREFIX><NAME>, and its bit's line comment is <NAME>.
func TestCapNamesAreTheKernels(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "capflags.go", nil, parser.ParseComments|parser.SkipObjectResolution)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("capflags.go is not here (a VM holds the test binary only): the host's go test reads it")
	}
	if err != nil {
		t.Fatal(err)
	}
	prefixes := map[string]string{ // public type: the kernel's prefix
		"DeviceCap":    "IB_UVERBS_DEVICE_",
		"PortCap":      "IB_UVERBS_PCF_",
		"RawPacketCap": "IB_UVERBS_RAW_PACKET_CAP_",
	}
	kernel := map[string]string{}  // public constant: the kernel's name less its prefix
	comment := map[string]string{} // public constant: its bit's line comment
	for _, decl := range f.Decls {
		d, ok := decl.(*ast.GenDecl)
		if !ok || d.Tok != token.CONST {
			continue
		}
		for _, spec := range d.Specs {
			vs := spec.(*ast.ValueSpec)
			name := vs.Names[0].Name
			switch v := vs.Values[0].(type) {
			case *ast.SelectorExpr: // DeviceCapX DeviceCap = uapi.IB_UVERBS_DEVICE_X
				typ := vs.Type.(*ast.Ident).Name
				k, ok := strings.CutPrefix(v.Sel.Name, prefixes[typ])
				if !ok || prefixes[typ] == "" {
					t.Errorf("%s %s = uapi.%s: not a kernel name with the prefix %q", name, typ, v.Sel.Name, prefixes[typ])
				}
				kernel[name] = k
			case *ast.CallExpr: // deviceCapBitX = deviceCapBit(DeviceCapX) // X
				pub := v.Args[0].(*ast.Ident).Name
				if vs.Comment == nil {
					t.Errorf("%s has no line comment: stringer would name it %s", name, name)
					continue
				}
				comment[pub] = strings.TrimSpace(vs.Comment.Text())
			}
		}
	}
	if len(kernel) == 0 {
		t.Fatal("no constants found in capflags.go")
	}
	for pub, k := range kernel {
		c, ok := comment[pub]
		switch {
		case !ok:
			t.Errorf("%s has no bit constant for stringer", pub)
		case c != k:
			t.Errorf("%s's bit is named %q; the kernel calls it %q", pub, c, k)
		}
	}
	for pub := range comment {
		if _, ok := kernel[pub]; !ok {
			t.Errorf("a bit constant names %s, which is no public constant from uapi", pub)
		}
	}
}
