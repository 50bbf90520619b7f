package netlink

import (
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LinkAdd creates a netdev of the given kind ("dummy").
func LinkAdd(name, kind string) error {
	b := NewBuilder(ifinfo(0, 0, 0))
	b.String(unix.IFLA_IFNAME, name)
	b.Nested(unix.IFLA_LINKINFO, func(b *Builder) { b.String(unix.IFLA_INFO_KIND, kind) })
	if err := routeDo(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, b.Bytes()); err != nil {
		return fmt.Errorf("ip link add %s type %s: %w", name, kind, err)
	}
	return nil
}

// VethAdd creates a veth pair name <-> peer.
func VethAdd(name, peer string) error {
	b := NewBuilder(ifinfo(0, 0, 0))
	b.String(unix.IFLA_IFNAME, name)
	b.Nested(unix.IFLA_LINKINFO, func(b *Builder) {
		b.String(unix.IFLA_INFO_KIND, "veth")
		b.Nested(unix.IFLA_INFO_DATA, func(b *Builder) {
			b.Nested(vethInfoPeer, func(b *Builder) {
				b.b = append(b.b, ifinfo(0, 0, 0)...)
				b.String(unix.IFLA_IFNAME, peer)
			})
		})
	})
	if err := routeDo(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL, b.Bytes()); err != nil {
		return fmt.Errorf("ip link add %s type veth peer %s: %w", name, peer, err)
	}
	return nil
}

const vethInfoPeer = 1 // VETH_INFO_PEER, <linux/veth.h>

// LinkSetUp sets IFF_UP on the netdev name.
func LinkSetUp(name string) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("ip link set %s up: %w", name, err)
	}
	b := NewBuilder(ifinfo(int32(ifi.Index), unix.IFF_UP, unix.IFF_UP))
	if err := routeDo(unix.RTM_NEWLINK, 0, b.Bytes()); err != nil {
		return fmt.Errorf("ip link set %s up: %w", name, err)
	}
	return nil
}

// AddrAdd adds an address with its prefix length to the netdev name.
func AddrAdd(name string, p netip.Prefix) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("ip addr add %s dev %s: %w", p, name, err)
	}
	family, alen := unix.AF_INET, 4
	if p.Addr().Is6() {
		family, alen = unix.AF_INET6, 16
	}
	hdr := unix.IfAddrmsg{Family: uint8(family), Prefixlen: uint8(p.Bits()), Index: uint32(ifi.Index)}
	b := NewBuilder(unsafe.Slice((*byte)(unsafe.Pointer(&hdr)), unix.SizeofIfAddrmsg))
	a := p.Addr().AsSlice()[:alen]
	b.Add(unix.IFA_LOCAL, a)
	b.Add(unix.IFA_ADDRESS, a)
	if err := routeDo(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, b.Bytes()); err != nil {
		return fmt.Errorf("ip addr add %s dev %s: %w", p, name, err)
	}
	return nil
}

// ifinfo returns a struct ifinfomsg.
func ifinfo(index int32, flags, change uint32) []byte {
	m := unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: index, Flags: flags, Change: change}
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&m)), unix.SizeofIfInfomsg)...)
}

func routeDo(typ uint16, flags uint16, payload []byte) error {
	c, err := Dial(unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Execute(typ, flags, payload)
	return err
}
