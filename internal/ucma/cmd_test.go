package ucma

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uapi"
)

// A field is bytes at an offset of a command's body, placed as the C
// layout (rdma_user_cm.h, docs/rdmacm-facts.md) puts them: the tests
// spell the offsets out by hand, never from the Go structs.
type field struct {
	off  int
	b    []byte
	resp bool // the body's response (or optval) field: the address of the command's response memory
}

func u8(off int, v uint8) field { return field{off: off, b: []byte{v}} }
func u16(off int, v uint16) field {
	return field{off: off, b: binary.NativeEndian.AppendUint16(nil, v)}
}
func u32(off int, v uint32) field {
	return field{off: off, b: binary.NativeEndian.AppendUint32(nil, v)}
}
func u64(off int, v uint64) field {
	return field{off: off, b: binary.NativeEndian.AppendUint64(nil, v)}
}
func raw(off int, b []byte) field { return field{off: off, b: b} }
func respAt(off int) field        { return field{off: off, resp: true} }

// sin is a struct sockaddr_in at off, written by hand: family in host
// order, port and address in network order, 8 zero bytes.
func sin(off int, s string) field {
	ap := netip.MustParseAddrPort(s)
	b := binary.NativeEndian.AppendUint16(nil, 2)
	b = binary.BigEndian.AppendUint16(b, ap.Port())
	a := ap.Addr().As4()
	return field{off: off, b: append(append(b, a[:]...), make([]byte, 8)...)}
}

// sin6 is a struct sockaddr_in6 at off: family, port, flow info 0, the
// address, the scope id in host order.
func sin6(off int, s string, scope uint32) field {
	ap := netip.MustParseAddrPort(s)
	b := binary.NativeEndian.AppendUint16(nil, 10)
	b = binary.BigEndian.AppendUint16(b, ap.Port())
	b = append(b, 0, 0, 0, 0)
	a := ap.Addr().As16()
	b = append(b, a[:]...)
	return field{off: off, b: binary.NativeEndian.AppendUint32(b, scope)}
}

// TestEncode holds each command's request to the kernel's layout: the
// header (command number, in = the body's size, out = the response's)
// and every byte of the body.
func TestEncode(t *testing.T) {
	ibGID := [16]byte{0xfe, 0x80, 15: 2}
	ib := Sockaddr{Family: AF_IB, IB: IBSockaddr{PKey: 0xffff, FlowInfo: 7, GID: ibGID, SID: 0x1060000 | 7471, SIDMask: ^uint64(0), ScopeID: 3}}
	ibBytes := binary.NativeEndian.AppendUint16(nil, 27)
	ibBytes = binary.BigEndian.AppendUint16(ibBytes, 0xffff)
	ibBytes = binary.BigEndian.AppendUint32(ibBytes, 7)
	ibBytes = append(ibBytes, ibGID[:]...)
	ibBytes = binary.BigEndian.AppendUint64(ibBytes, 0x1060000|7471)
	ibBytes = binary.BigEndian.AppendUint64(ibBytes, ^uint64(0))
	ibBytes = binary.NativeEndian.AppendUint64(ibBytes, 3)
	private := []byte("hello, peer")

	for _, c := range []struct {
		name    string
		build   func(c *cmd) error
		cmd     uint32
		in, out int
		fields  []field
	}{
		{"create id", func(c *cmd) error { c.createID(0x1122334455667788, 0x106, 2); return nil },
			0, 24, 4, []field{u64(0, 0x1122334455667788), respAt(8), u16(16, 0x106), u8(18, 2)}},
		{"destroy id", func(c *cmd) error { c.destroyID(7); return nil },
			1, 16, 4, []field{respAt(0), u32(8, 7)}},
		{"bind ip v4", func(c *cmd) error { return c.bindIP(9, netip.MustParseAddrPort("192.0.2.1:7471")) },
			2, 40, 0, []field{sin(8, "192.0.2.1:7471"), u32(36, 9)}},
		{"bind ip v6", func(c *cmd) error { return c.bindIP(9, netip.MustParseAddrPort("[fe80::1%4]:7471")) },
			2, 40, 0, []field{sin6(8, "[fe80::1]:7471", 4), u32(36, 9)}},
		{"bind", func(c *cmd) error { return c.bind(3, IPSockaddr(netip.MustParseAddrPort("192.0.2.1:0"))) },
			20, 136, 0, []field{u32(0, 3), u16(4, 16), sin(8, "192.0.2.1:0")}},
		{"bind ib", func(c *cmd) error { return c.bind(3, ib) },
			20, 136, 0, []field{u32(0, 3), u16(4, 48), raw(8, ibBytes)}},
		{"resolve ip", func(c *cmd) error {
			return c.resolveIP(5, netip.AddrPort{}, netip.MustParseAddrPort("192.0.2.2:7471"), 2000)
		}, 3, 64, 0, []field{sin(28, "192.0.2.2:7471"), u32(56, 5), u32(60, 2000)}},
		{"resolve ip with source", func(c *cmd) error {
			return c.resolveIP(5, netip.MustParseAddrPort("192.0.2.1:0"), netip.MustParseAddrPort("192.0.2.2:7471"), 2000)
		}, 3, 64, 0, []field{sin(0, "192.0.2.1:0"), sin(28, "192.0.2.2:7471"), u32(56, 5), u32(60, 2000)}},
		{"resolve addr", func(c *cmd) error {
			return c.resolveAddr(5, Sockaddr{}, IPSockaddr(netip.MustParseAddrPort("[2001:db8::2]:7471")), 500)
		}, 21, 272, 0, []field{u32(0, 5), u32(4, 500), u16(8, 0), u16(10, 28), sin6(144, "[2001:db8::2]:7471", 0)}},
		{"resolve addr with source", func(c *cmd) error {
			return c.resolveAddr(5, IPSockaddr(netip.MustParseAddrPort("192.0.2.1:0")), IPSockaddr(netip.MustParseAddrPort("192.0.2.2:7471")), 500)
		}, 21, 272, 0, []field{u32(0, 5), u32(4, 500), u16(8, 16), u16(10, 16), sin(16, "192.0.2.1:0"), sin(144, "192.0.2.2:7471")}},
		{"resolve route", func(c *cmd) error { c.resolveRoute(6, 1000); return nil },
			4, 8, 0, []field{u32(0, 6), u32(4, 1000)}},
		{"query addr", func(c *cmd) error { c.query(8, uapi.RDMA_USER_CM_QUERY_ADDR, sizeofAddrResp); return nil },
			19, 16, 280, []field{respAt(0), u32(8, 8), u32(12, 0)}},
		{"query path", func(c *cmd) error { c.query(8, uapi.RDMA_USER_CM_QUERY_PATH, sizeofPathResp); return nil },
			19, 16, 8 + 6*72 + 1, []field{respAt(0), u32(8, 8), u32(12, 1)}},
		{"query gid", func(c *cmd) error { c.query(8, uapi.RDMA_USER_CM_QUERY_GID, sizeofAddrResp); return nil },
			19, 16, 280, []field{respAt(0), u32(8, 8), u32(12, 2)}},
		{"query route", func(c *cmd) error { c.queryRoute(8); return nil },
			5, 16, 208, []field{respAt(0), u32(8, 8)}},
		{"connect", func(c *cmd) error {
			return c.connect(10, &ConnParam{PrivateData: private, QPNum: 0x123456, QKey: 9, SRQ: true,
				ResponderResources: 1, InitiatorDepth: 2, FlowControl: 3, RetryCount: 4, RNRRetryCount: 5}, ECE{VendorID: 0x15b3, AttrMod: 6})
		}, 6, 288, 0, []field{u32(0, 0x123456), u32(4, 9), raw(8, private), u8(264, uint8(len(private))), u8(265, 1),
			u8(266, 1), u8(267, 2), u8(268, 3), u8(269, 4), u8(270, 5), u8(271, 1), u32(272, 10), u32(280, 0x15b3), u32(284, 6)}},
		{"listen", func(c *cmd) error { c.listen(11, 64); return nil },
			7, 8, 0, []field{u32(0, 11), u32(4, 64)}},
		{"accept", func(c *cmd) error {
			return c.accept(12, 0xabc, &ConnParam{PrivateData: private, QPNum: 77, ResponderResources: 16, InitiatorDepth: 16, RNRRetryCount: 7}, ECE{})
		}, 8, 296, 0, []field{u64(0, 0xabc), u32(8, 77), raw(16, private), u8(272, uint8(len(private))),
			u8(274, 16), u8(275, 16), u8(278, 7), u8(279, 1), u32(280, 12)}},
		{"accept to establish", func(c *cmd) error { return c.accept(12, 0, nil, ECE{}) },
			8, 296, 0, []field{u32(280, 12)}},
		{"reject", func(c *cmd) error { return c.reject(13, 28, private) },
			9, 264, 0, []field{u32(0, 13), u8(4, uint8(len(private))), u8(5, 28), raw(8, private)}},
		{"disconnect", func(c *cmd) error { c.disconnect(14); return nil },
			10, 4, 0, []field{u32(0, 14)}},
		{"init qp attr", func(c *cmd) error { c.initQPAttr(15, 2); return nil },
			11, 16, 144, []field{respAt(0), u32(8, 15), u32(12, 2)}},
		{"get event", func(c *cmd) error { c.getEvent(); return nil },
			12, 8, 336, []field{respAt(0)}},
		{"set option", func(c *cmd) error { return c.setOption(16, 0, 1, []byte{1, 0, 0, 0}) },
			14, 24, 0, []field{respAt(0), u32(8, 16), u32(12, 0), u32(16, 1), u32(20, 4)}},
		{"notify", func(c *cmd) error { c.notify(17, 9); return nil },
			15, 8, 0, []field{u32(0, 17), u32(4, 9)}},
		{"migrate id", func(c *cmd) error { c.migrateID(18, 42); return nil },
			18, 16, 4, []field{respAt(0), u32(8, 18), u32(12, 42)}},
		{"join mcast", func(c *cmd) error {
			return c.joinMcast(19, 0xfeed, IPSockaddr(netip.MustParseAddrPort("239.1.2.3:0")), 1)
		}, 22, 152, 4, []field{respAt(0), u64(8, 0xfeed), u32(16, 19), u16(20, 16), u16(22, 1), sin(24, "239.1.2.3:0")}},
		{"leave mcast", func(c *cmd) error { c.leaveMcast(20); return nil },
			17, 16, 4, []field{respAt(0), u32(8, 20)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cm := new(cmd)
			// Leftovers of an earlier command must not show through.
			for i := range cm.req {
				cm.req[i] = ^uint64(0)
			}
			if err := c.build(cm); err != nil {
				t.Fatal(err)
			}
			got := cm.request()
			if len(got) != hdrSize+c.in {
				t.Fatalf("request of %d bytes, want the header and %d", len(got), c.in)
			}
			hdr := binary.NativeEndian.AppendUint32(nil, c.cmd)
			hdr = binary.NativeEndian.AppendUint16(hdr, uint16(c.in))
			hdr = binary.NativeEndian.AppendUint16(hdr, uint16(c.out))
			want := append(hdr, make([]byte, c.in)...)
			respAddr := cm.responsePointer()
			for _, f := range c.fields {
				b := f.b
				if f.resp {
					b = unsafe.Slice((*byte)(unsafe.Pointer(&respAddr)), 8)
				}
				copy(want[hdrSize+f.off:], b)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if len(cm.response()) != c.out {
				t.Errorf("response room %d bytes, want %d", len(cm.response()), c.out)
			}
		})
	}
}

// TestEncodeRefuses checks the input a command cannot carry: EINVAL,
// before anything reaches the kernel.
func TestEncodeRefuses(t *testing.T) {
	long := make([]byte, 256)
	v4 := netip.MustParseAddrPort("192.0.2.1:1")
	for _, c := range []struct {
		name  string
		build func(c *cmd) error
	}{
		{"connect private data", func(c *cmd) error { return c.connect(1, &ConnParam{PrivateData: long}, ECE{}) }},
		{"accept private data", func(c *cmd) error { return c.accept(1, 1, &ConnParam{PrivateData: long}, ECE{}) }},
		{"reject private data", func(c *cmd) error { return c.reject(1, 0, long) }},
		{"bind ip without address", func(c *cmd) error { return c.bindIP(1, netip.AddrPort{}) }},
		{"bind without address", func(c *cmd) error { return c.bind(1, Sockaddr{}) }},
		{"bind AF_INET with IPv6", func(c *cmd) error {
			return c.bind(1, Sockaddr{Family: AF_INET, IP: netip.MustParseAddrPort("[::1]:1")})
		}},
		{"bind AF_INET6 with IPv4", func(c *cmd) error { return c.bind(1, Sockaddr{Family: AF_INET6, IP: v4}) }},
		{"bind unknown family", func(c *cmd) error { return c.bind(1, Sockaddr{Family: 99}) }},
		{"resolve ip without destination", func(c *cmd) error { return c.resolveIP(1, v4, netip.AddrPort{}, 1) }},
		{"resolve addr without destination", func(c *cmd) error { return c.resolveAddr(1, IPSockaddr(v4), Sockaddr{}, 1) }},
		{"join mcast without address", func(c *cmd) error { return c.joinMcast(1, 1, Sockaddr{}, 0) }},
		{"zone that is no interface", func(c *cmd) error {
			return c.bindIP(1, netip.MustParseAddrPort("[fe80::1%no-such-interface-here]:1"))
		}},
		{"option too long", func(c *cmd) error { return c.setOption(1, 0, 0, make([]byte, resSize+1)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.build(new(cmd)); !errors.Is(err, syscall.EINVAL) {
				t.Errorf("error %v, want EINVAL", err)
			}
		})
	}
	// The most a CM message's private data can be, at the struct's limit.
	if err := new(cmd).connect(1, &ConnParam{PrivateData: long[:255]}, ECE{}); err != nil {
		t.Errorf("255 bytes of private data: %v", err)
	}
}

// TestPresetIBDevIndex checks that the address and route queries preset
// ibdev_index as librdmacm does, so an older kernel's shorter answer
// reads as no index.
func TestPresetIBDevIndex(t *testing.T) {
	cm := new(cmd)
	cm.query(1, uapi.RDMA_USER_CM_QUERY_ADDR, sizeofAddrResp)
	if got := binary.NativeEndian.Uint32(cm.response()[272:]); got != noIBDevIndex {
		t.Errorf("query addr: ibdev_index preset %#x", got)
	}
	a, err := parseAddrResp(cm.response())
	if err != nil || a.HaveIBDevIndex {
		t.Errorf("parse of an unanswered query addr: %+v, %v", a, err)
	}
	cm.queryRoute(1)
	if got := binary.NativeEndian.Uint32(cm.response()[200:]); got != noIBDevIndex {
		t.Errorf("query route: ibdev_index preset %#x", got)
	}
}
