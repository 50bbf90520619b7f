package ucma

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/goverbs/goverbs/uapi"
)

// The address families as Linux numbers them. The rdma_cm is Linux's,
// so these are its values on every GOOS, whatever x/sys/unix says for the
// one the code is built for (darwin's AF_INET6 is 30).
const (
	AF_INET  = 2
	AF_INET6 = 10
	AF_IB    = uapi.AF_IB
)

// The sizes of the socket addresses the kernel takes and reports: what
// it calls rdma_addr_size, per family.
const (
	sizeofSockaddrIn  = 16 // struct sockaddr_in
	sizeofSockaddrIn6 = 28 // struct sockaddr_in6
	sizeofSockaddrIB  = 48 // struct sockaddr_ib
	sizeofStorage     = 128
)

// Sockaddr is a socket address as the rdma_cm takes and reports it: an IP
// address and port (AF_INET or AF_INET6), or an InfiniBand address
// (AF_IB). The zero value is no address (family 0). [IPSockaddr] makes
// one from a netip.AddrPort.
type Sockaddr struct {
	// Family is AF_INET, AF_INET6 or AF_IB, or 0 for no address.
	Family uint16
	// IP is the address and port of AF_INET (an Is4 address) and
	// AF_INET6 (any other; a zone is the IPv6 scope id, the interface's
	// index in decimal or its name).
	IP netip.AddrPort
	// IB is the address of AF_IB.
	IB IBSockaddr
}

// IBSockaddr is struct sockaddr_ib's content (AF_IB): a GID and P_Key,
// and the service id that stands for a port. Integers are in host order
// here; the kernel's struct holds all but the scope id big-endian.
type IBSockaddr struct {
	PKey     uint16
	FlowInfo uint32
	GID      [16]byte
	SID      uint64 // service id
	SIDMask  uint64
	ScopeID  uint64
}

// IPSockaddr returns the Sockaddr of ap: AF_INET if its address is an
// IPv4 one (Is4), AF_INET6 otherwise, IPv4-mapped IPv6 included. An
// invalid ap gives the zero Sockaddr.
func IPSockaddr(ap netip.AddrPort) Sockaddr {
	switch {
	case !ap.IsValid():
		return Sockaddr{}
	case ap.Addr().Is4():
		return Sockaddr{Family: AF_INET, IP: ap}
	default:
		return Sockaddr{Family: AF_INET6, IP: ap}
	}
}

// String formats s: "192.0.2.1:7471", "[fe80::1%2]:7471",
// "ib:fe80::2/ffff/0x1060000" (GID, P_Key, service id), "none".
func (s Sockaddr) String() string {
	switch s.Family {
	case 0:
		return "none"
	case AF_INET, AF_INET6:
		return s.IP.String()
	case AF_IB:
		return fmt.Sprintf("ib:%s/%04x/%#x", netip.AddrFrom16(s.IB.GID), s.IB.PKey, s.IB.SID)
	}
	return fmt.Sprintf("family %d", s.Family)
}

var (
	errNoRoom    = errors.New("no room for the address")
	errNotIP     = errors.New("not an IP address")
	errZone      = errors.New("IPv6 zone is no interface")
	errFamilyMix = errors.New("address does not match its family")
)

// size returns the size of s's socket address, 0 for none.
func (s Sockaddr) size() (int, error) {
	switch s.Family {
	case 0:
		return 0, nil
	case AF_INET:
		if !s.IP.Addr().Is4() {
			return 0, fmt.Errorf("AF_INET %v: %w", s.IP, errFamilyMix)
		}
		return sizeofSockaddrIn, nil
	case AF_INET6:
		if !s.IP.Addr().Is6() {
			return 0, fmt.Errorf("AF_INET6 %v: %w", s.IP, errFamilyMix)
		}
		return sizeofSockaddrIn6, nil
	case AF_IB:
		return sizeofSockaddrIB, nil
	}
	return 0, fmt.Errorf("address family %d: %w", s.Family, errNotIP)
}

// putSockaddr writes s into b as the kernel reads it (struct sockaddr_in,
// sockaddr_in6 or sockaddr_ib) and returns its size; b's other bytes are
// left as they are. The zero Sockaddr writes nothing and has size 0.
func putSockaddr(b []byte, s Sockaddr) (int, error) {
	n, err := s.size()
	if err != nil || n == 0 {
		return 0, err
	}
	if len(b) < n {
		return 0, fmt.Errorf("%s: %d bytes, %w of %d", s, len(b), errNoRoom, n)
	}
	ne.PutUint16(b[0:], s.Family)
	switch s.Family {
	case AF_INET:
		binary.BigEndian.PutUint16(b[2:], s.IP.Port())
		a := s.IP.Addr().As4()
		copy(b[4:8], a[:])
		clear(b[8:16])
	case AF_INET6:
		scope, err := scopeID(s.IP.Addr().Zone())
		if err != nil {
			return 0, err
		}
		binary.BigEndian.PutUint16(b[2:], s.IP.Port())
		binary.BigEndian.PutUint32(b[4:], 0) // flow info
		a := s.IP.Addr().As16()
		copy(b[8:24], a[:])
		ne.PutUint32(b[24:], scope)
	case AF_IB:
		binary.BigEndian.PutUint16(b[2:], s.IB.PKey)
		binary.BigEndian.PutUint32(b[4:], s.IB.FlowInfo)
		copy(b[8:24], s.IB.GID[:])
		binary.BigEndian.PutUint64(b[24:], s.IB.SID)
		binary.BigEndian.PutUint64(b[32:], s.IB.SIDMask)
		ne.PutUint64(b[40:], s.IB.ScopeID)
	}
	return n, nil
}

// scopeID returns the IPv6 scope id a zone names: a decimal number, or
// an interface's name.
func scopeID(zone string) (uint32, error) {
	if zone == "" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifi, err := net.InterfaceByName(zone)
	if err != nil {
		return 0, fmt.Errorf("zone %q: %w: %v", zone, errZone, err)
	}
	return uint32(ifi.Index), nil
}

// zoneName names the IPv6 scope id as package net does: the interface's
// name, or the number where no interface has it. Only link-local
// addresses carry one, so the lookup (a netlink request) costs nothing
// to connections over other addresses.
func zoneName(scope uint32) string {
	if ifi, err := net.InterfaceByIndex(int(scope)); err == nil {
		return ifi.Name
	}
	return strconv.FormatUint(uint64(scope), 10)
}

// parseSockaddr reads the socket address in b, the size the kernel gave
// it (a storage of 128 bytes cut to its size, or a sockaddr_in6's 28): an
// empty b, or family 0, is no address. Bytes past the family's address
// are ignored. It never panics.
func parseSockaddr(b []byte) (Sockaddr, error) {
	if len(b) < 2 {
		return Sockaddr{}, nil
	}
	var s Sockaddr
	s.Family = ne.Uint16(b)
	switch s.Family {
	case 0:
		return Sockaddr{}, nil
	case AF_INET:
		if len(b) < sizeofSockaddrIn {
			return Sockaddr{}, fmt.Errorf("AF_INET address of %d bytes, want %d", len(b), sizeofSockaddrIn)
		}
		s.IP = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:]))
	case AF_INET6:
		if len(b) < sizeofSockaddrIn6 {
			return Sockaddr{}, fmt.Errorf("AF_INET6 address of %d bytes, want %d", len(b), sizeofSockaddrIn6)
		}
		a := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := ne.Uint32(b[24:]); scope != 0 {
			a = a.WithZone(zoneName(scope))
		}
		s.IP = netip.AddrPortFrom(a, binary.BigEndian.Uint16(b[2:]))
	case AF_IB:
		if len(b) < sizeofSockaddrIB {
			return Sockaddr{}, fmt.Errorf("AF_IB address of %d bytes, want %d", len(b), sizeofSockaddrIB)
		}
		s.IB = IBSockaddr{
			PKey:     binary.BigEndian.Uint16(b[2:]),
			FlowInfo: binary.BigEndian.Uint32(b[4:]),
			GID:      [16]byte(b[8:24]),
			SID:      binary.BigEndian.Uint64(b[24:]),
			SIDMask:  binary.BigEndian.Uint64(b[32:]),
			ScopeID:  ne.Uint64(b[40:]),
		}
	default:
		return Sockaddr{}, fmt.Errorf("address family %d: %w", s.Family, errNotIP)
	}
	return s, nil
}
