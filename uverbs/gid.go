package uverbs

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/goverbs/goverbs/internal/errs"
)

// GID is a 128-bit global identifier (union ibv_gid), in network order: a
// port's address in its GID table. On RoCE it is an IPv6 address, or an
// IPv4 address mapped into IPv6 (::ffff:192.0.2.1).
type GID [16]byte

// String formats the GID as an IPv6 address the way glibc's inet_ntop
// does, which is how ibv_devinfo -v prints RoCE v2 GIDs:
// "fe80::250:b6ff:fe5d:20f8", "::ffff:192.0.2.1", "::".
func (g GID) String() string {
	var w [8]uint16
	for i := range w {
		w[i] = uint16(g[2*i])<<8 | uint16(g[2*i+1])
	}
	// The longest run of zero words (the first of equal ones), if at
	// least two long, becomes "::".
	best, bestLen, cur, curLen := -1, 0, -1, 0
	for i, v := range w {
		if v != 0 {
			cur = -1
			continue
		}
		if cur < 0 {
			cur, curLen = i, 0
		}
		if curLen++; curLen > bestLen {
			best, bestLen = cur, curLen
		}
	}
	if bestLen < 2 {
		best = -1
	}
	b := make([]byte, 0, 46)
	for i := 0; i < len(w); i++ {
		if best >= 0 && i >= best && i < best+bestLen {
			if i == best {
				b = append(b, ':')
			}
			continue
		}
		if i != 0 {
			b = append(b, ':')
		}
		// An IPv4 address in the last 32 bits: ::a.b.c.d or ::ffff:a.b.c.d.
		if i == 6 && best == 0 && (bestLen == 6 || (bestLen == 5 && w[5] == 0xffff)) {
			return string(netip.AddrFrom4([4]byte(g[12:16])).AppendTo(b))
		}
		b = strconv.AppendUint(b, uint64(w[i]), 16)
	}
	if best >= 0 && best+bestLen == len(w) {
		b = append(b, ':')
	}
	return string(b)
}

// IsZero reports whether the GID is all zeros: an empty GID table entry.
func (g GID) IsZero() bool { return g == GID{} }

// Addr returns the GID as an IPv6 address.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g) }

// ParseGID reads a GID in any IPv6 form: the full form sysfs shows
// ("fe80:0000:0000:0000:0250:b6ff:fe5d:20f8"), the short one String
// gives, or an IPv4 address, which becomes its IPv4-mapped GID.
func ParseGID(s string) (GID, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || a.Zone() != "" {
		return GID{}, fmt.Errorf("bad GID %s", errs.Quote(s))
	}
	return GID(a.As16()), nil
}

// GIDType is the protocol a GID table entry is for (enum ibv_gid_type).
type GIDType uint8

// GID types, as enum ib_uverbs_gid_type numbers them.
const (
	GIDTypeIB     GIDType = 0 // InfiniBand
	GIDTypeRoCEv1 GIDType = 1 // RoCE v1: Ethernet, ethertype 0x8915
	GIDTypeRoCEv2 GIDType = 2 // RoCE v2: UDP/IP, destination port 4791
)

// String names the type as rdma-core does: "IB", "RoCE v1", "RoCE v2".
func (t GIDType) String() string { return enumString(t, "GIDType", "IB", "RoCE v1", "RoCE v2") }

// GIDEntry is one valid entry of a port's GID table (struct
// ibv_gid_entry).
type GIDEntry struct {
	GID   GID
	Index int // its index in the port's table: what a QP or AH names as its source GID index
	Port  int
	Type  GIDType
	// Ifindex and Netdev name the network device the GID belongs to, on
	// RoCE; 0 and "" on InfiniBand, or when the device has gone.
	Ifindex int
	Netdev  string
}

// parseSysfsGIDType reads a gid_attrs/types/N file of sysfs: "IB/RoCE
// v1" (IB on an InfiniBand port, RoCE v1 on an Ethernet one) or "RoCE v2",
// as rdma-core's query_sysfs_gid_type does.
func parseSysfsGIDType(s string, ethernet bool) (GIDType, error) {
	switch strings.TrimSpace(s) {
	case "IB/RoCE v1":
		if ethernet {
			return GIDTypeRoCEv1, nil
		}
		return GIDTypeIB, nil
	case "RoCE v2":
		return GIDTypeRoCEv2, nil
	}
	return 0, fmt.Errorf("unknown GID type %s: %w", errs.Quote(s), syscall.EPROTO)
}

// MTU is an InfiniBand MTU (enum ibv_mtu): a port's maximum and active
// MTU, and a connected QP's path MTU.
type MTU uint8

// The MTUs of InfiniBand and RoCE.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes (256 to 4096), or 0 for a value that is
// not an MTU.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// String gives the MTU in bytes, "1024", as ibv_devinfo prints it; a
// value that is not an MTU prints as "MTU(n)".
func (m MTU) String() string {
	if n := m.Bytes(); n != 0 {
		return strconv.Itoa(n)
	}
	return "MTU(" + strconv.Itoa(int(m)) + ")"
}
