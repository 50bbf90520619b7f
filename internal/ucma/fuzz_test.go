package ucma

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uapi"
)

// FuzzParseEvent reads any event response: too short is an error, and
// otherwise every field is the bytes at its C offset, and both views of
// the parameter union stay inside it.
func FuzzParseEvent(f *testing.F) {
	conn := put(make([]byte, 336), u64(0, 1), u32(8, 2), u32(12, uapi.RDMA_CM_EVENT_CONNECT_REQUEST), u8(284, 56))
	ud := put(make([]byte, 336), u32(12, uapi.RDMA_CM_EVENT_ESTABLISHED), u8(316, 180))
	f.Add(conn)
	f.Add(ud)
	f.Add(bytes.Repeat([]byte{0xff}, 336))
	f.Add(make([]byte, 324))
	f.Add(make([]byte, 330)) // part of ece
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := parseEvent(b)
		if len(b) < minEventResp {
			if err == nil {
				t.Fatalf("%d bytes parsed", len(b))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		n := binary.NativeEndian
		if ev.UID != n.Uint64(b) || ev.ID != n.Uint32(b[8:]) || ev.Type != n.Uint32(b[12:]) || ev.Status != int32(n.Uint32(b[16:])) {
			t.Fatalf("header %+v from %x", ev, b[:20])
		}
		if len(b) >= 336 && (ev.ECE.VendorID != n.Uint32(b[328:]) || ev.ECE.AttrMod != n.Uint32(b[332:])) {
			t.Fatalf("ece %+v from %x", ev.ECE, b[328:336])
		}
		c := ev.ConnParam()
		if c.QPNum != n.Uint32(b[20:]) || !bytes.Equal(c.PrivateData, b[28:28+int(b[284])]) {
			t.Fatalf("conn param %+v", c)
		}
		u := ev.UDParam()
		if u.QKey != n.Uint32(b[24:]) || !bytes.Equal(u.PrivateData, b[60:60+int(b[316])]) {
			t.Fatalf("ud param %+v", u)
		}
	})
}

// FuzzParseAddrResp reads any QUERY_ADDR or QUERY_GID response: an
// error, or addresses that write back as the kernel would read them.
func FuzzParseAddrResp(f *testing.F) {
	f.Add(put(make([]byte, 280), be64(0, 1), u16(12, 16), u16(14, 28), sin(16, "192.0.2.1:1"), sin6(144, "[::1]:2", 5), u32(272, 0)))
	f.Add(put(make([]byte, 280), u16(12, 48), u16(16, AF_IB), u16(14, 48), u16(144, AF_IB)))
	f.Add(put(make([]byte, 280), u16(12, 0xffff)))
	f.Add(make([]byte, 279))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseAddrResp(b)
		if err != nil {
			return
		}
		if len(b) < sizeofAddrResp {
			t.Fatalf("%d bytes parsed", len(b))
		}
		if a.NodeGUID != binary.BigEndian.Uint64(b) || a.PKey != binary.BigEndian.Uint16(b[10:]) {
			t.Fatalf("guid %#x pkey %#x from %x", a.NodeGUID, a.PKey, b[:12])
		}
		roundTrip(t, a.Src)
		roundTrip(t, a.Dst)
	})
}

// FuzzParseRoute reads any QUERY_ROUTE response.
func FuzzParseRoute(f *testing.F) {
	f.Add(put(make([]byte, 208), be64(0, 7), sin(136, "192.0.2.1:0"), sin(164, "192.0.2.2:7471"), u32(192, 1)))
	f.Add(put(make([]byte, 208), sin6(136, "[fe80::1%1]:0", 1), u32(192, 0xffffffff)))
	f.Add(make([]byte, 207))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRoute(b)
		if err != nil {
			return
		}
		if len(b) < sizeofRouteResp || r.NumPaths != binary.NativeEndian.Uint32(b[192:]) {
			t.Fatalf("%d bytes: %+v", len(b), r)
		}
		roundTrip(t, r.Src)
		roundTrip(t, r.Dst)
	})
}

// FuzzParsePaths reads any path query response: no more records than
// the kernel says or the room holds, each as the bytes give it.
func FuzzParsePaths(f *testing.F) {
	f.Add(put(make([]byte, sizeofPathResp), u32(0, 2), u32(8, 0x29)))
	f.Add(put(make([]byte, sizeofPathResp), u32(0, 0xffffffff)))
	f.Add(put(make([]byte, 81), u32(0, 1)))
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePaths(b)
		if err != nil {
			if len(b) >= 8 {
				t.Fatalf("%d bytes: %v", len(b), err)
			}
			return
		}
		if uint64(len(p)) > uint64(binary.NativeEndian.Uint32(b)) || 8+len(p)*72 > len(b) {
			t.Fatalf("%d paths from %d bytes saying %d", len(p), len(b), binary.NativeEndian.Uint32(b))
		}
		for i, pd := range p {
			off := 8 + i*72
			if pd.Flags != binary.NativeEndian.Uint32(b[off:]) || !bytes.Equal(pd.Record[:], b[off+8:off+72]) {
				t.Fatalf("path %d: %+v", i, pd)
			}
		}
	})
}

// FuzzSockaddr reads any socket address; one that parses writes back
// as the kernel reads it and parses again to the same.
func FuzzSockaddr(f *testing.F) {
	f.Add(sin(0, "192.0.2.1:7471").b)
	f.Add(sin6(0, "[fe80::1]:7174", 2).b)
	f.Add(put(make([]byte, 48), u16(0, AF_IB), be16(2, 0xffff), be64(24, 0x1060000)))
	f.Add([]byte{10, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseSockaddr(b)
		if err != nil {
			return
		}
		roundTrip(t, s)
	})
}

// roundTrip writes s and reads it back.
func roundTrip(t *testing.T, s Sockaddr) {
	t.Helper()
	b := make([]byte, sizeofStorage)
	n, err := putSockaddr(b, s)
	if err != nil {
		t.Fatalf("%v does not write back: %v", s, err)
	}
	got, err := parseSockaddr(b[:n])
	if err != nil {
		t.Fatalf("%v reads back as an error: %v", s, err)
	}
	if diff := cmp.Diff(s, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
}
