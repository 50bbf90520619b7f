package uverbs_test

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// openHiding opens rxe0 acting as a kernel without the given ioctl
// methods of UVERBS_OBJECT_DEVICE, as one older than 5.10 (GID queries)
// or 5.0 (QUERY_PORT).
func openHiding(t *testing.T, methods ...uint16) *uverbs.Context {
	t.Helper()
	testutil.RequireDevice(t, testutil.DevicePath)
	uverbs.SetTestConnHook(func(c *transport.Conn) {
		for _, m := range methods {
			c.Hide(uapi.UVERBS_OBJECT_DEVICE, m)
		}
	})
	defer uverbs.SetTestConnHook(nil)
	c, err := uverbs.Open("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestQueryDevice(t *testing.T) {
	c := openRXE(t)
	a, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", a)
	// The GUIDs are those sysfs shows; rxe's firmware version is 0.
	if a.NodeGUID != c.Device().NodeGUID || a.SysImageGUID != c.Device().SysImageGUID {
		t.Errorf("GUIDs %s, %s; sysfs has %s, %s", a.NodeGUID, a.SysImageGUID, c.Device().NodeGUID, c.Device().SysImageGUID)
	}
	if a.FWVersion != "0.0.0" || a.PhysPortCnt != 1 || a.VendorID != 0xffffff {
		t.Errorf("fw %q, ports %d, vendor %#x; want rxe's 0.0.0, 1, 0xffffff", a.FWVersion, a.PhysPortCnt, a.VendorID)
	}
	// rxe_param.h: RXE_MAX_CQE is (1 << 15) - 1, the limit NewCQ meets.
	if a.MaxCQE != 32767 || a.MaxQP < 1 || a.MaxQPWR < 1 || a.MaxSGE < 1 || a.MaxPD < 1 || a.MaxMR < 1 || a.MaxAH < 1 {
		t.Errorf("limits: %+v", a)
	}
	// The extended flags carry the plain ones in their low half.
	if uint32(a.DeviceCapFlagsEx) != uint32(a.DeviceCapFlags) || !a.DeviceCapFlags.Has(uverbs.DeviceCapPortActiveEvent) {
		t.Errorf("device_cap_flags %v, _ex %v", a.DeviceCapFlags, a.DeviceCapFlagsEx)
	}
	if a.AtomicCap != uverbs.AtomicHCA {
		t.Errorf("atomic cap %v", a.AtomicCap)
	}

	// The same through write(2) instead of INVOKE_WRITE.
	old := openHiding(t, uapi.UVERBS_METHOD_INVOKE_WRITE)
	b, err := old.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("INVOKE_WRITE and write(2) differ (-ioctl +write):\n%s", diff)
	}
}

func TestQueryPort(t *testing.T) {
	c := openRXE(t)
	p, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", p)
	// rxe on the dummy netdev: RoCE, up, 1024-entry GID table, no LIDs.
	if p.State != uverbs.PortActive || p.PhysState != uverbs.PhysLinkUp || p.LinkLayer != uverbs.LinkLayerEthernet ||
		!p.GRHRequired || p.LID != 0 || p.GIDTblLen < 2 {
		t.Errorf("port 1: %+v", p)
	}
	// rxe's max MTU is 4096; the active one follows the netdev's MTU
	// (1500 on dummy: 1024).
	if p.MaxMTU != uverbs.MTU4096 || p.ActiveMTU != uverbs.MTU1024 {
		t.Errorf("MTU max %v active %v", p.MaxMTU, p.ActiveMTU)
	}
	if p.ActiveWidth.Lanes() == 0 || p.ActiveSpeed.Gbps() == 0 {
		t.Errorf("width %v speed %v", p.ActiveWidth, p.ActiveSpeed)
	}

	// A kernel without the QUERY_PORT ioctl (< 5.0) answers the legacy
	// write command, which lacks port_cap_flags2 (0 on rxe anyway).
	old := openHiding(t, uapi.UVERBS_METHOD_QUERY_PORT, uapi.UVERBS_METHOD_INVOKE_WRITE)
	q, err := old.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, q); diff != "" {
		t.Errorf("ioctl and write command differ (-ioctl +write):\n%s", diff)
	}
}

// ibv_query_port(3) fails for a port the device does not have; rxe has
// one. Caller input never reaches the kernel truncated to a u8.
func TestQueryPortBadPort(t *testing.T) {
	for _, name := range []string{"ioctl", "write"} {
		t.Run(name, func(t *testing.T) {
			c := openRXE(t)
			if name == "write" {
				c = openHiding(t, uapi.UVERBS_METHOD_QUERY_PORT)
			}
			testutil.CheckFDLeak(t)
			for _, port := range []int{0, 2, 255, -1, 256, 257, math.MaxInt, math.MinInt} {
				_, err := c.QueryPort(port)
				var op *uverbs.OpError
				if !errors.As(err, &op) || op.Op != "query port" || op.Device != "rxe0" || !errors.Is(err, unix.EINVAL) {
					t.Errorf("QueryPort(%d): err = %v, want an *OpError for query port rxe0 wrapping EINVAL", port, err)
				}
				if !strings.Contains(fmt.Sprint(err), "port "+strconv.Itoa(port)) {
					t.Errorf("QueryPort(%d): %q does not name the port", port, err)
				}
			}
		})
	}
}

func TestQueryAfterClose(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	c, err := uverbs.Open("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for name, f := range map[string]func() error{
		"query device": func() error { _, err := c.QueryDevice(); return err },
		"query port":   func() error { _, err := c.QueryPort(1); return err },
		"query gid":    func() error { _, err := c.QueryGID(1, 0); return err },
		"gid table":    func() error { _, err := c.GIDTable(1); return err },
	} {
		if err := f(); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// gidPaths are the ways the GID table can be read: each must give the same.
var gidPaths = []struct {
	name  string
	hide  []uint16 // ioctl methods the kernel acts as lacking
	limit int      // QUERY_GID_TABLE entries per call, if lowered
}{
	{name: "QUERY_GID_TABLE"},
	// More valid GIDs than one command holds: the table call fails with
	// EINVAL and each index is read on its own.
	{name: "table overflow", limit: 1},
	{name: "QUERY_GID_ENTRY", hide: []uint16{uapi.UVERBS_METHOD_QUERY_GID_TABLE}},
	// Kernels before 5.10: sysfs.
	{name: "sysfs", hide: []uint16{uapi.UVERBS_METHOD_QUERY_GID_TABLE, uapi.UVERBS_METHOD_QUERY_GID_ENTRY}},
}

// rxe on d0 (192.0.2.1/24, from the VM harness) has the default GID, the
// link-local address made from the node GUID, and the IPv4 address
// mapped into IPv6. rxe speaks only RoCE v2, so both are RoCE v2 and
// there are no RoCE v1 entries.
func TestGIDTable(t *testing.T) {
	d0, err := net.InterfaceByName("d0")
	if err != nil {
		testutil.RequireDevice(t, testutil.DevicePath)
		t.Fatalf("the harness's netdev: %v", err)
	}
	var first []uverbs.GIDEntry
	for _, path := range gidPaths {
		t.Run(path.name, func(t *testing.T) {
			c := openHiding(t, path.hide...)
			if path.limit > 0 {
				defer uverbs.SetGIDTableMax(path.limit)()
			}
			testutil.CheckFDLeak(t)
			tab, err := c.GIDTable(1)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range tab {
				t.Logf("GID[%3d] %-28s %-8s %s (%d)", e.Index, e.GID, e.Type, e.Netdev, e.Ifindex)
			}
			if first == nil {
				first = tab
				checkRXEGIDs(t, c, tab, d0)
			} else if diff := cmp.Diff(first, tab); diff != "" {
				t.Errorf("differs from %s (-%s +%s):\n%s", gidPaths[0].name, gidPaths[0].name, path.name, diff)
			}
			// Every entry reads the same on its own.
			for _, e := range tab {
				got, err := c.QueryGID(1, e.Index)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(e, got); diff != "" {
					t.Errorf("QueryGID(1, %d) differs from the table (-table +QueryGID):\n%s", e.Index, diff)
				}
			}
		})
	}
}

func checkRXEGIDs(t *testing.T, c *uverbs.Context, tab []uverbs.GIDEntry, d0 *net.Interface) {
	t.Helper()
	var v4 *uverbs.GIDEntry
	for i, e := range tab {
		if e.Port != 1 || e.Type != uverbs.GIDTypeRoCEv2 || e.Netdev != "d0" || e.Ifindex != d0.Index {
			t.Errorf("entry %+v: want port 1, RoCE v2, on d0 (ifindex %d)", e, d0.Index)
		}
		if i > 0 && e.Index <= tab[i-1].Index {
			t.Errorf("entries out of index order: %d after %d", e.Index, tab[i-1].Index)
		}
		if e.GID.Addr() == netip.MustParseAddr("::ffff:192.0.2.1") {
			v4 = &tab[i]
		}
	}
	if len(tab) < 2 {
		t.Fatalf("%d GIDs, want the default one and d0's IPv4 address", len(tab))
	}
	// GID 0 is the default GID: fe80::/64 with the node GUID as interface id.
	var want uverbs.GID
	want[0], want[1] = 0xfe, 0x80
	for i := range 8 {
		want[8+i] = byte(uint64(c.Device().NodeGUID) >> (56 - 8*i))
	}
	if tab[0].Index != 0 || tab[0].GID != want {
		t.Errorf("GID[%d] = %s, want the default GID %s at index 0", tab[0].Index, tab[0].GID, want)
	}
	if v4 == nil || v4.GID.String() != "::ffff:192.0.2.1" {
		t.Errorf("no GID for d0's 192.0.2.1")
	}
}

// ibv_query_gid_ex(3): "ENODATA gid_index is within the GID table size of
// port port_num but there is no data in this index."
func TestQueryGIDErrors(t *testing.T) {
	for _, path := range gidPaths[2:] {
		t.Run(path.name, func(t *testing.T) {
			c := openHiding(t, path.hide...)
			testutil.CheckFDLeak(t)
			p, err := c.QueryPort(1)
			if err != nil {
				t.Fatal(err)
			}
			tab, err := c.GIDTable(1)
			if err != nil {
				t.Fatal(err)
			}
			used := map[int]bool{}
			for _, e := range tab {
				used[e.Index] = true
			}
			empty := 0
			for used[empty] {
				empty++
			}
			for _, tt := range []struct {
				port, index int
				want        error
			}{
				{1, empty, unix.ENODATA},
				{1, p.GIDTblLen - 1, unix.ENODATA},
				{1, p.GIDTblLen, unix.EINVAL},
				{1, math.MaxInt, unix.EINVAL},
				{1, -1, unix.EINVAL},
				{2, 0, unix.EINVAL},
				{0, 0, unix.EINVAL},
				{-1, 0, unix.EINVAL},
				{256, 0, unix.EINVAL},
			} {
				_, err := c.QueryGID(tt.port, tt.index)
				var op *uverbs.OpError
				if !errors.As(err, &op) || op.Op != "query gid" || !errors.Is(err, tt.want) {
					t.Errorf("QueryGID(%d, %d): err = %v, want an *OpError for query gid wrapping %v", tt.port, tt.index, err, tt.want)
				}
			}
			for _, port := range []int{0, 2, -5, 300} {
				if _, err := c.GIDTable(port); !errors.Is(err, unix.EINVAL) {
					t.Errorf("GIDTable(%d): err = %v, want EINVAL", port, err)
				}
			}
		})
	}
}

// rdma-core's ibv_devinfo -v, run beside us in the VM, reports the same
// device, port and GIDs.
func TestQueryMatchesIBVDevinfo(t *testing.T) {
	c := openRXE(t)
	dev, port, gids := ibvDevinfo(t, c.Device().Name)
	a, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	wantDev := map[string]string{
		"fw_ver":                    a.FWVersion,
		"node_guid":                 a.NodeGUID.String(),
		"sys_image_guid":            a.SysImageGUID.String(),
		"vendor_id":                 fmt.Sprintf("0x%04x", a.VendorID),
		"vendor_part_id":            fmt.Sprint(a.VendorPartID),
		"hw_ver":                    fmt.Sprintf("0x%X", a.HWVer),
		"phys_port_cnt":             fmt.Sprint(a.PhysPortCnt),
		"max_mr_size":               fmt.Sprintf("0x%x", a.MaxMRSize),
		"page_size_cap":             fmt.Sprintf("0x%x", a.PageSizeCap),
		"max_qp":                    fmt.Sprint(a.MaxQP),
		"max_qp_wr":                 fmt.Sprint(a.MaxQPWR),
		"device_cap_flags":          fmt.Sprintf("0x%08x", uint64(a.DeviceCapFlags)),
		"max_sge":                   fmt.Sprint(a.MaxSGE),
		"max_sge_rd":                fmt.Sprint(a.MaxSGERd),
		"max_cq":                    fmt.Sprint(a.MaxCQ),
		"max_cqe":                   fmt.Sprint(a.MaxCQE),
		"max_mr":                    fmt.Sprint(a.MaxMR),
		"max_pd":                    fmt.Sprint(a.MaxPD),
		"max_qp_rd_atom":            fmt.Sprint(a.MaxQPRdAtom),
		"max_res_rd_atom":           fmt.Sprint(a.MaxResRdAtom),
		"max_qp_init_rd_atom":       fmt.Sprint(a.MaxQPInitRdAtom),
		"atomic_cap":                fmt.Sprintf("%s (%d)", a.AtomicCap, a.AtomicCap),
		"max_mw":                    fmt.Sprint(a.MaxMW),
		"max_raw_ipv6_qp":           fmt.Sprint(a.MaxRawIPv6QP),
		"max_raw_ethy_qp":           fmt.Sprint(a.MaxRawEthernetQP),
		"max_mcast_grp":             fmt.Sprint(a.MaxMcastGrp),
		"max_mcast_qp_attach":       fmt.Sprint(a.MaxMcastQPAttach),
		"max_total_mcast_qp_attach": fmt.Sprint(a.MaxTotalMcastQPAttach),
		"max_ah":                    fmt.Sprint(a.MaxAH),
		"max_srq":                   fmt.Sprint(a.MaxSRQ),
		"max_srq_wr":                fmt.Sprint(a.MaxSRQWR),
		"max_srq_sge":               fmt.Sprint(a.MaxSRQSGE),
		"max_pkeys":                 fmt.Sprint(a.MaxPkeys),
		"local_ca_ack_delay":        fmt.Sprint(a.LocalCAAckDelay),
		"device_cap_flags_ex":       fmt.Sprintf("0x%X", uint64(a.DeviceCapFlagsEx)),
		"max_wq_type_rq":            fmt.Sprint(a.MaxWQTypeRQ),
		"num_comp_vectors":          fmt.Sprint(c.NumCompVectors()),
	}
	if diff := cmp.Diff(wantDev, pickKeys(dev, wantDev)); diff != "" {
		t.Errorf("device (-goverbs +ibv_devinfo):\n%s", diff)
	}
	p, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	wantPort := map[string]string{
		"state":           fmt.Sprintf("%s (%d)", p.State, p.State),
		"max_mtu":         fmt.Sprintf("%s (%d)", p.MaxMTU, p.MaxMTU),
		"active_mtu":      fmt.Sprintf("%s (%d)", p.ActiveMTU, p.ActiveMTU),
		"sm_lid":          fmt.Sprint(p.SMLID),
		"port_lid":        fmt.Sprint(p.LID),
		"port_lmc":        fmt.Sprintf("0x%02x", p.LMC),
		"link_layer":      p.LinkLayer.String(),
		"max_msg_sz":      fmt.Sprintf("0x%x", p.MaxMsgSz),
		"port_cap_flags":  fmt.Sprintf("0x%08x", uint32(p.PortCapFlags)),
		"port_cap_flags2": fmt.Sprintf("0x%04x", p.PortCapFlags2),
		"bad_pkey_cntr":   fmt.Sprintf("0x%x", p.BadPkeyCntr),
		"qkey_viol_cntr":  fmt.Sprintf("0x%x", p.QkeyViolCntr),
		"sm_sl":           fmt.Sprint(p.SMSL),
		"pkey_tbl_len":    fmt.Sprint(p.PkeyTblLen),
		"gid_tbl_len":     fmt.Sprint(p.GIDTblLen),
		"subnet_timeout":  fmt.Sprint(p.SubnetTimeout),
		"init_type_reply": fmt.Sprint(p.InitTypeReply),
		"active_width":    fmt.Sprintf("%s (%d)", p.ActiveWidth, p.ActiveWidth),
		"active_speed":    fmt.Sprintf("%s (%d)", p.ActiveSpeed, p.ActiveSpeed),
		"phys_state":      fmt.Sprintf("%s (%d)", p.PhysState, p.PhysState),
	}
	if diff := cmp.Diff(wantPort, pickKeys(port, wantPort)); diff != "" {
		t.Errorf("port 1 (-goverbs +ibv_devinfo):\n%s", diff)
	}
	tab, err := c.GIDTable(1)
	if err != nil {
		t.Fatal(err)
	}
	wantGIDs := map[int]string{}
	for _, e := range tab {
		wantGIDs[e.Index] = e.GID.String() + ", " + e.Type.String()
	}
	for i, s := range gids { // RoCE v1 GIDs print in the long form: compare their values
		if g, typ, ok := strings.Cut(s, ", "); ok {
			if gid, err := uverbs.ParseGID(g); err == nil {
				gids[i] = gid.String() + ", " + typ
			}
		}
	}
	if diff := cmp.Diff(wantGIDs, gids); diff != "" {
		t.Errorf("GIDs (-goverbs +ibv_devinfo):\n%s", diff)
	}
}

func pickKeys(m, keys map[string]string) map[string]string {
	out := map[string]string{}
	for k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// ibvDevinfo runs rdma-core's ibv_devinfo -v on dev and returns its
// device lines, its port lines and its GIDs by index. Outside the VM,
// where rdma-core may be missing or another version, it skips.
func ibvDevinfo(t *testing.T, dev string) (device, port map[string]string, gids map[int]string) {
	t.Helper()
	const bin = "/usr/bin/ibv_devinfo"
	if !testutil.InVM() {
		t.Skip("compares with the VM's rdma-core; run: make vmtest RUN=" + t.Name())
	}
	lib := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	cmd := exec.Command(bin, "-v", "-d", dev)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH=/lib/"+lib+":/usr/lib/"+lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	device, port, gids = map[string]string{}, map[string]string{}, map[int]string{}
	cur := device
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch {
		case k == "port":
			cur = port
		case strings.HasPrefix(k, "GID["):
			i, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(k, "GID["), "]")))
			if err != nil {
				t.Fatalf("ibv_devinfo line %q", line)
			}
			gids[i] = v
		default:
			if _, dup := cur[k]; !dup {
				cur[k] = v
			}
		}
	}
	return device, port, gids
}

// glibc's inet_ntop, which ibv_devinfo prints RoCE v2 GIDs with.
func TestGIDString(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"::", "::"},
		{"::1", "::1"},
		{"fe80:0000:0000:0000:7891:9eff:feb0:8d12", "fe80::7891:9eff:feb0:8d12"},
		{"0000:0000:0000:0000:0000:ffff:c000:0201", "::ffff:192.0.2.1"},
		{"::ffff:0:0", "::ffff:0.0.0.0"},
		{"::c000:201", "::192.0.2.1"}, // IPv4-compatible, printed as such
		{"::1:c000:201", "::1:c000:201"},
		{"2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"},      // the longest run of zeros
		{"2001:0:0:1:0:0:1:1", "2001::1:0:0:1:1"},        // the first of two equal runs
		{"2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"}, // one zero word stays
		{"1:0:0:0:0:0:0:0", "1::"},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
	} {
		g, err := uverbs.ParseGID(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.String(); got != tt.want {
			t.Errorf("%s: String() = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{"", "fe80::1%d0", "192.0.2.300", "1:2:3", "gg::1"} {
		if g, err := uverbs.ParseGID(bad); err == nil {
			t.Errorf("ParseGID(%q) = %s, want an error", bad, g)
		}
	}
}

func FuzzParseGID(f *testing.F) {
	f.Add("fe80::7891:9eff:feb0:8d12")
	f.Add("0000:0000:0000:0000:0000:ffff:c000:0201\n")
	f.Add("::192.0.2.1")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := uverbs.ParseGID(s)
		if err != nil {
			return
		}
		back, err := uverbs.ParseGID(g.String())
		if err != nil || back != g {
			t.Fatalf("%q parsed to %x, whose String %q reads back as %x, %v", s, g, g.String(), back, err)
		}
		if g.Addr().As16() != g {
			t.Fatalf("Addr of %x", g)
		}
	})
}

func TestPortTypes(t *testing.T) {
	for _, tt := range []struct {
		v    fmt.Stringer
		want string
	}{
		{uverbs.MTU256, "256"}, {uverbs.MTU4096, "4096"}, {uverbs.MTU(0), "MTU(0)"}, {uverbs.MTU(6), "MTU(6)"},
		{uverbs.PortActive, "PORT_ACTIVE"}, {uverbs.PortDown, "PORT_DOWN"}, {uverbs.PortInit, "PORT_INIT"},
		{uverbs.PortArmed, "PORT_ARMED"}, {uverbs.PortActiveDefer, "PORT_ACTIVE_DEFER"}, {uverbs.PortState(9), "PortState(9)"},
		{uverbs.PhysLinkUp, "LINK_UP"}, {uverbs.PhysDisabled, "DISABLED"}, {uverbs.PhysPolling, "POLLING"},
		{uverbs.LinkLayerEthernet, "Ethernet"}, {uverbs.LinkLayerInfiniBand, "InfiniBand"},
		{uverbs.Width1X, "1X"}, {uverbs.Width4X, "4X"}, {uverbs.Width12X, "12X"}, {uverbs.Width2X, "2X"}, {uverbs.Width(3), "Width(3)"},
		{uverbs.SpeedSDR, "2.5 Gbps"}, {uverbs.SpeedFDR10, "10.0 Gbps"}, {uverbs.SpeedEDR, "25.0 Gbps"}, {uverbs.SpeedXDR, "200.0 Gbps"},
		{uverbs.GIDTypeIB, "IB"}, {uverbs.GIDTypeRoCEv1, "RoCE v1"}, {uverbs.GIDTypeRoCEv2, "RoCE v2"},
		{uverbs.AtomicHCA, "ATOMIC_HCA"}, {uverbs.AtomicGlob, "ATOMIC_GLOB"},
	} {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%T(%v) = %q, want %q", tt.v, tt.v, got, tt.want)
		}
	}
	for m, n := range map[uverbs.MTU]int{uverbs.MTU256: 256, uverbs.MTU512: 512, uverbs.MTU1024: 1024, uverbs.MTU2048: 2048, uverbs.MTU4096: 4096, 0: 0, 6: 0, 255: 0} {
		if got := m.Bytes(); got != n {
			t.Errorf("MTU(%d).Bytes() = %d, want %d", m, got, n)
		}
	}
}
