package ucma

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uapi"
)

// put writes fields into b: the replies below are built by hand at the C
// offsets, as the kernel writes them.
func put(b []byte, fields ...field) []byte {
	for _, f := range fields {
		copy(b[f.off:], f.b)
	}
	return b
}

func be16(off int, v uint16) field { return field{off: off, b: binary.BigEndian.AppendUint16(nil, v)} }
func be64(off int, v uint64) field { return field{off: off, b: binary.BigEndian.AppendUint64(nil, v)} }

func TestParseEventConn(t *testing.T) {
	pd := []byte("private data of the peer")
	b := put(make([]byte, 336),
		u64(0, 0xdeadbeef), u32(8, 42), u32(12, uapi.RDMA_CM_EVENT_CONNECT_REQUEST), u32(16, 0),
		// param.conn at 20
		u32(20, 0x112233), u32(24, 0), raw(28, pd), u8(284, uint8(len(pd))), u8(285, 1),
		u8(286, 4), u8(287, 5), u8(288, 1), u8(289, 7), u8(290, 6), u8(291, 1),
		u32(328, 0x15b3), u32(332, 9))
	ev, err := parseEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if ev.UID != 0xdeadbeef || ev.ID != 42 || ev.Type != uapi.RDMA_CM_EVENT_CONNECT_REQUEST || ev.Status != 0 {
		t.Errorf("event %+v", ev)
	}
	if ev.ECE != (ECE{VendorID: 0x15b3, AttrMod: 9}) {
		t.Errorf("ece %+v", ev.ECE)
	}
	want := ConnParam{PrivateData: pd, QPNum: 0x112233, SRQ: true, ResponderResources: 4, InitiatorDepth: 5,
		FlowControl: 1, RetryCount: 7, RNRRetryCount: 6}
	if diff := cmp.Diff(want, ev.ConnParam()); diff != "" {
		t.Errorf("conn param (-want +got):\n%s", diff)
	}
}

func TestParseEventUD(t *testing.T) {
	pd := []byte{1, 2, 3}
	dgid := [16]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 2}
	b := put(make([]byte, 336),
		u64(0, 1), u32(8, 3), u32(12, uapi.RDMA_CM_EVENT_ESTABLISHED),
		// param.ud at 20: qp_num, qkey, ah_attr (grh, dlid, sl, ..., port_num), private data at 60
		u32(20, 0x99), u32(24, uapi.RDMA_UDP_QKEY), raw(28, dgid[:]), u32(44, 0x12345), u8(48, 1), u8(49, 64), u8(50, 3),
		u16(52, 0xbeef), u8(54, 2), u8(57, 1), u8(58, 1), raw(60, pd), u8(316, uint8(len(pd))))
	ev, err := parseEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	ud := ev.UDParam()
	want := UDParam{PrivateData: pd, QPNum: 0x99, QKey: uapi.RDMA_UDP_QKEY, AH: uapi.IBUverbsAHAttr{
		Grh:  uapi.IBUverbsGlobalRoute{Dgid: dgid, FlowLabel: 0x12345, SgidIndex: 1, HopLimit: 64, TrafficClass: 3},
		Dlid: 0xbeef, Sl: 2, IsGlobal: 1, PortNum: 1}}
	if !bytes.Equal(ud.PrivateData, want.PrivateData) || ud.QPNum != want.QPNum || ud.QKey != want.QKey || ud.AH != want.AH {
		t.Errorf("ud param %+v, want %+v", ud, want)
	}
}

func TestParseEventStatus(t *testing.T) {
	b := put(make([]byte, 336), u32(12, uapi.RDMA_CM_EVENT_ADDR_ERROR), u32(16, uint32(0xffffff92))) // -ETIMEDOUT
	ev, err := parseEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Status != -110 {
		t.Errorf("status %d, want -110", ev.Status)
	}
}

func TestParseEventShort(t *testing.T) {
	// The kernel writes at least all but reserved and ece; ece then reads 0.
	b := put(make([]byte, 324), u32(12, uapi.RDMA_CM_EVENT_DISCONNECTED))
	ev, err := parseEvent(b)
	if err != nil || ev.Type != uapi.RDMA_CM_EVENT_DISCONNECTED || ev.ECE != (ECE{}) {
		t.Errorf("324 bytes: %+v, %v", ev, err)
	}
	if _, err := parseEvent(b[:323]); !errors.Is(err, syscall.EIO) {
		t.Errorf("323 bytes: error %v, want EIO", err)
	}
}

func TestParseAddrResp(t *testing.T) {
	b := put(make([]byte, 280),
		be64(0, 0x0002c9fffe010203), u8(8, 1), be16(10, 0xffff), u16(12, 16), u16(14, 28),
		sin(16, "192.0.2.1:7471"), sin6(144, "[2001:db8::2]:9", 0), u32(272, 3))
	a, err := parseAddrResp(b)
	if err != nil {
		t.Fatal(err)
	}
	want := AddrInfo{NodeGUID: 0x0002c9fffe010203, PortNum: 1, PKey: 0xffff,
		Src:        IPSockaddr(netip.MustParseAddrPort("192.0.2.1:7471")),
		Dst:        IPSockaddr(netip.MustParseAddrPort("[2001:db8::2]:9")),
		IBDevIndex: 3, HaveIBDevIndex: true}
	if diff := cmp.Diff(want, a, cmpSockaddr); diff != "" {
		t.Errorf("addr (-want +got):\n%s", diff)
	}

	// Before resolution: no destination, no device.
	a, err = parseAddrResp(put(make([]byte, 280), u16(12, 16), sin(16, "0.0.0.0:7471"), u32(272, noIBDevIndex)))
	if err != nil {
		t.Fatal(err)
	}
	if a.Dst.Family != 0 || a.HaveIBDevIndex || a.IBDevIndex != 0 || a.NodeGUID != 0 {
		t.Errorf("unresolved: %+v", a)
	}

	for _, bad := range []struct {
		name string
		b    []byte
	}{
		{"short", make([]byte, 279)},
		{"size past the storage", put(make([]byte, 280), u16(12, 129))},
		{"size short of the family", put(make([]byte, 280), u16(14, 16), sin6(144, "[::1]:1", 0))},
		{"unknown family", put(make([]byte, 280), u16(12, 16), u16(16, 1))},
	} {
		if _, err := parseAddrResp(bad.b); !errors.Is(err, syscall.EIO) {
			t.Errorf("%s: error %v, want EIO", bad.name, err)
		}
	}
}

func TestParseGIDResp(t *testing.T) {
	var gid [16]byte
	gid[0], gid[1], gid[15] = 0xfe, 0x80, 7
	ibsa := func(off int) []field {
		return []field{u16(off, AF_IB), be16(off+2, 0xffff), raw(off+8, gid[:]), be64(off+24, 0x1060000|7471)}
	}
	b := put(make([]byte, 280), append(append([]field{u16(12, 48), u16(14, 48), be16(10, 0xffff)}, ibsa(16)...), ibsa(144)...)...)
	a, err := parseAddrResp(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Sockaddr{Family: AF_IB, IB: IBSockaddr{PKey: 0xffff, GID: gid, SID: 0x1060000 | 7471}}
	if diff := cmp.Diff(want, a.Src, cmpSockaddr); diff != "" {
		t.Errorf("src (-want +got):\n%s", diff)
	}
}

func TestParseRoute(t *testing.T) {
	sgid := [16]byte{10: 0xff, 11: 0xff, 12: 192, 14: 2, 15: 1}
	b := put(make([]byte, 208),
		be64(0, 0x1122334455667788),
		raw(8, make([]byte, 16)), raw(24, sgid[:]), be16(8+52, 0x8001), // ib_route[0]: dgid, sgid, pkey at 52
		sin(136, "192.0.2.1:0"), sin(164, "192.0.2.2:7471"), u32(192, 1), u8(196, 1), u32(200, 0))
	r, err := parseRoute(b)
	if err != nil {
		t.Fatal(err)
	}
	if r.NodeGUID != 0x1122334455667788 || r.NumPaths != 1 || r.PortNum != 1 || !r.HaveIBDevIndex || r.IBDevIndex != 0 {
		t.Errorf("route %+v", r)
	}
	if r.Paths[0].Sgid != sgid || beU16(r.Paths[0].Pkey) != 0x8001 {
		t.Errorf("path 0: sgid %x, pkey %#x", r.Paths[0].Sgid, beU16(r.Paths[0].Pkey))
	}
	if r.Src.IP != netip.MustParseAddrPort("192.0.2.1:0") || r.Dst.IP != netip.MustParseAddrPort("192.0.2.2:7471") {
		t.Errorf("addresses %v %v", r.Src, r.Dst)
	}
	if _, err := parseRoute(b[:207]); !errors.Is(err, syscall.EIO) {
		t.Errorf("short: error %v, want EIO", err)
	}
	if _, err := parseRoute(put(b, u16(136, AF_IB))); !errors.Is(err, syscall.EIO) {
		t.Errorf("AF_IB in a sockaddr_in6: error %v, want EIO", err)
	}
}

func TestParsePaths(t *testing.T) {
	rec := func(i int) []byte {
		b := make([]byte, 64)
		for j := range b {
			b[j] = byte(i*64 + j)
		}
		return b
	}
	flags := uint32(uapi.IB_PATH_GMP | uapi.IB_PATH_PRIMARY | uapi.IB_PATH_BIDIRECTIONAL)
	b := put(make([]byte, sizeofPathResp), u32(0, 2), u32(8, flags), raw(16, rec(0)), u32(80, flags), raw(88, rec(1)))
	p, err := parsePaths(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []PathData{{Flags: flags, Record: [64]byte(rec(0))}, {Flags: flags, Record: [64]byte(rec(1))}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}

	// The kernel says how many paths the id has and writes what fits:
	// another record only while more than a record's room is left.
	for _, c := range []struct {
		room, num, want int
	}{
		{8, 3, 0}, {8 + 72, 3, 0}, {8 + 72 + 1, 3, 1}, {sizeofPathResp, 9, 6}, {sizeofPathResp, 0, 0},
	} {
		p, err := parsePaths(put(make([]byte, c.room), u32(0, uint32(c.num))))
		if err != nil || len(p) != c.want {
			t.Errorf("%d bytes saying %d paths: %d paths, %v; want %d", c.room, c.num, len(p), err, c.want)
		}
	}
	if _, err := parsePaths(make([]byte, 7)); !errors.Is(err, syscall.EIO) {
		t.Errorf("short: error %v, want EIO", err)
	}
}

func TestParseQPAttr(t *testing.T) {
	b := put(make([]byte, 144), u32(0, 0x1fe), u32(4, 2), u32(32, 0xabcdef), u16(40+24, 0x17))
	a, err := parseQPAttr(b)
	if err != nil {
		t.Fatal(err)
	}
	if a.QPAttrMask != 0x1fe || a.QPState != 2 || a.DestQPNum != 0xabcdef || a.AHAttr.Dlid != 0x17 {
		t.Errorf("qp attr %+v", a)
	}
	if _, err := parseQPAttr(b[:143]); !errors.Is(err, syscall.EIO) {
		t.Errorf("short: error %v, want EIO", err)
	}
}

func TestParseU32(t *testing.T) {
	if v, err := parseU32("x", []byte{1, 0, 0, 0, 9}); err != nil || v != binary.NativeEndian.Uint32([]byte{1, 0, 0, 0}) {
		t.Errorf("parseU32 = %d, %v", v, err)
	}
	if _, err := parseU32("x", []byte{1, 0, 0}); !errors.Is(err, syscall.EIO) {
		t.Errorf("short: error %v, want EIO", err)
	}
}

func TestParseABIVersion(t *testing.T) {
	for in, want := range map[string]int{"4\n": 4, "3": 3, " 4 ": 4} {
		if got, err := parseABIVersion(in); err != nil || got != want {
			t.Errorf("parseABIVersion(%q) = %d, %v", in, got, err)
		}
	}
	if _, err := parseABIVersion("four"); err == nil {
		t.Error(`parseABIVersion("four") did not fail`)
	}
	for v, ok := range map[int]bool{2: false, 3: true, 4: true, 5: false} {
		if _, err := checkABIVersion(v); (err == nil) != ok {
			t.Errorf("checkABIVersion(%d): %v", v, err)
		}
	}
}
