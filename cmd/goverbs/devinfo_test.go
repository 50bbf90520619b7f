package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uverbs"
)

func TestParseDevinfo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		want   devinfoOpts
		status int
		ok     bool
		stderr string // a part of it
	}{
		{name: "none", ok: true},
		{name: "all", args: []string{"-d", "rxe0", "-i", "1", "-v"}, want: devinfoOpts{dev: "rxe0", port: 1, verbose: true}, ok: true},
		{name: "long names", args: []string{"--ib-dev=mlx5_0", "--ib-port", "0x2", "--verbose", "--list"},
			want: devinfoOpts{dev: "mlx5_0", port: 2, verbose: true, list: true}, ok: true},
		{name: "port 0", args: []string{"-i", "0"}, want: devinfoOpts{}, status: 1, stderr: "goverbs: devinfo: port 0 out of range [1, 255]\n"},
		{name: "port 256", args: []string{"-i", "256"}, want: devinfoOpts{port: 256}, status: 1, stderr: "port 256 out of range"},
		{name: "port not a number", args: []string{"-i", "one"}, status: 2, stderr: "invalid value"},
		{name: "unknown flag", args: []string{"-x"}, status: 2, stderr: "flag provided but not defined: -x"},
		{name: "argument", args: []string{"rxe0"}, status: 2, stderr: `unexpected argument "rxe0"`},
		{name: "help", args: []string{"-h"}, status: 0, stderr: "usage: goverbs devinfo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			o, status, ok := parseDevinfo(&stderr, tc.args)
			if ok != tc.ok || status != tc.status {
				t.Errorf("ok %v, status %d; want %v, %d", ok, status, tc.ok, tc.status)
			}
			if ok && o != tc.want {
				t.Errorf("options %+v, want %+v", o, tc.want)
			}
			if !strings.Contains(stderr.String(), tc.stderr) || (tc.stderr == "" && stderr.Len() > 0) {
				t.Errorf("stderr %q, want %q in it", stderr.String(), tc.stderr)
			}
		})
	}
}

func TestNodeTransport(t *testing.T) {
	for node, want := range map[string]string{
		"1: CA": "InfiniBand (0)", "2: switch": "InfiniBand (0)", "4: RNIC": "iWARP (1)", "5: usNIC": "usNIC (2)",
		"6: usNIC UDP": "usNIC UDP (3)", "7: unspecified": "unspecified (4)", "": "invalid transport (-1)", "9: x": "invalid transport (-1)",
	} {
		name, num := nodeTransport(node)
		if got := name + " (" + strconv.Itoa(num) + ")"; got != want {
			t.Errorf("nodeTransport(%q) = %s, want %s", node, got, want)
		}
	}
}

func TestDevinfoNames(t *testing.T) {
	for v, want := range map[uint8]string{0: "invalid value", 1: "1", 2: "2", 3: "4", 4: "8", 5: "15", 6: "invalid value"} {
		if got := vlString(v); got != want {
			t.Errorf("vlString(%d) = %q, want %q", v, got, want)
		}
	}
	for m, want := range map[uverbs.MTU]string{0: "invalid MTU", uverbs.MTU256: "256", uverbs.MTU4096: "4096", 6: "invalid MTU"} {
		if got := mtuString(m); got != want {
			t.Errorf("mtuString(%d) = %q, want %q", m, got, want)
		}
	}
}

func TestGIDString(t *testing.T) {
	parse := func(s string) uverbs.GID {
		g, err := uverbs.ParseGID(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for _, tc := range []struct {
		name     string
		gid      string
		typ      uverbs.GIDType
		ethernet bool
		want     string
	}{
		{"RoCE v2", "fe80::78f2:3eff:fef2:cd3c", uverbs.GIDTypeRoCEv2, true, "fe80::78f2:3eff:fef2:cd3c, RoCE v2"},
		{"RoCE v2 IPv4", "::ffff:192.0.2.1", uverbs.GIDTypeRoCEv2, true, "::ffff:192.0.2.1, RoCE v2"},
		{"RoCE v1", "fe80::78f2:3eff:fef2:cd3c", uverbs.GIDTypeRoCEv1, true, "fe80:0000:0000:0000:78f2:3eff:fef2:cd3c, RoCE v1"},
		{"RoCE v1 IPv4", "::ffff:192.0.2.1", uverbs.GIDTypeRoCEv1, true, "0000:0000:0000:0000:0000:ffff:c000:0201, RoCE v1"},
		{"InfiniBand", "fe80::c42:a103:65:9b44", uverbs.GIDTypeIB, false, "fe80:0000:0000:0000:0c42:a103:0065:9b44"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := uverbs.GIDEntry{GID: parse(tc.gid), Type: tc.typ}
			if got := gidString(e, tc.ethernet); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBitNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v       uint64
		names   []bitName
		unknown bool
		want    []string
	}{
		{"none", 0, deviceCapNames, true, nil},
		{"rxe", 0x01223c76, deviceCapNames, true, []string{"BAD_PKEY_CNTR", "BAD_QKEY_CNTR", "AUTO_PATH_MIG",
			"CHANGE_PHY_PORT", "UD_AV_PORT_ENFORCE", "PORT_ACTIVE_EVENT", "SYS_IMAGE_GUID", "RC_RNR_NAK_GEN",
			"SRQ_RESIZE", "MEM_WINDOW", "MEM_MGT_EXTENSIONS", "MEM_WINDOW_TYPE_2B"}},
		{"unknown", 1<<9 | 1<<31 | 1<<15, deviceCapNames, true, []string{"INIT_TYPE", "Unknown flags: 0x80008000"}},
		{"ex", 0x7_0000_0000, deviceCapExNames, true, []string{"RAW_SCATTER_FCS", "Unknown flags: 0x300000000"}},
		{"unknown left out", 0x13, rawPacketCapNames, false, []string{"C-VLAN stripping offload", "Scatter FCS offload"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, bitNames(tc.v, tc.names, tc.unknown)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestFieldTabs checks the tab rule against lines of ibv_devinfo's format
// strings, the odd lengths among them.
func TestFieldTabs(t *testing.T) {
	for _, tc := range []struct {
		indent int
		name   string
		col    int
		want   string
	}{
		{0, "hca_id", 8, "hca_id:\tx\n"},
		{1, "max_qp", devCol, "\tmax_qp:\t\t\t\tx\n"},
		{1, "max_sge", devCol, "\tmax_sge:\t\t\tx\n"},
		{1, "max_res_rd_atom", devCol, "\tmax_res_rd_atom:\t\tx\n"},
		{1, "max_total_mcast_qp_attach", devCol, "\tmax_total_mcast_qp_attach:\tx\n"},
		{1, "maximum available device memory", devCol, "\tmaximum available device memory:\tx\n"},
		{2, "port", 24, "\t\tport:\tx\n"},
		{3, "state", portCol, "\t\t\tstate:\t\t\tx\n"},
		{3, "max_mtu", portCol, "\t\t\tmax_mtu:\t\tx\n"},
		{3, "port_cap_flags2", portCol, "\t\t\tport_cap_flags2:\tx\n"},
		{3, "init_type_reply", portCol, "\t\t\tinit_type_reply:\tx\n"},
		{3, "GID[  0]", portCol, "\t\t\tGID[  0]:\t\tx\n"},
	} {
		var b strings.Builder
		f := &fieldWriter{w: &b}
		f.field(tc.indent, tc.name, tc.col, "%s", "x")
		if b.String() != tc.want {
			t.Errorf("field(%d, %q) wrote %q, want %q", tc.indent, tc.name, b.String(), tc.want)
		}
	}
}
