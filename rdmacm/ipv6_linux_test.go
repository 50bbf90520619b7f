package rdmacm

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

// rxeIP6 is the harness's IPv6 address on rxe0's netdev d0.
var rxeIP6 = netip.MustParseAddr("2001:db8::1")

// linkLocal returns d0's IPv6 link-local address, with its zone.
func linkLocal(t *testing.T) netip.Addr {
	t.Helper()
	ifi, err := net.InterfaceByName("d0")
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().IsLinkLocalUnicast() {
			return p.Addr().WithZone("d0")
		}
	}
	t.Fatalf("d0 has no IPv6 link-local address: %v", addrs)
	return netip.Addr{}
}

// sendBothWays sends a message each way over a connected pair.
func sendBothWays(t *testing.T, cli, srv *Conn) {
	t.Helper()
	cb, sb := newBuffer(t, cli, 4096), newBuffer(t, srv, 4096)
	for _, dir := range []struct {
		from, to *Conn
		fb, tb   *buffer
	}{{cli, srv, cb, sb}, {srv, cli, sb, cb}} {
		msg := []byte("over IPv6 to " + dir.to.LocalAddr().String())
		if _, err := dir.to.QP().PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{dir.tb.sge(t, 0, 256)}}}); err != nil {
			t.Fatal(err)
		}
		copy(dir.fb.mem[512:], msg)
		if _, err := dir.from.QP().PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{dir.fb.sge(t, 512, len(msg))}}}); err != nil {
			t.Fatal(err)
		}
		if wc := poll(t, dir.from, 1)[0]; wc.Status != cq.Success {
			t.Fatalf("send: %+v", wc)
		}
		if wc := poll(t, dir.to, 1)[0]; wc.Status != cq.Success || !bytes.Equal(dir.tb.mem[:wc.ByteLen], msg) {
			t.Fatalf("receive %+v: %q", wc, dir.tb.mem[:wc.ByteLen])
		}
	}
}

// TestIPv6 connects RC over IPv6: a global address, the link-local one
// with its zone, and the IPv6 wildcard taking both families; UD over the
// global address; an IPv4-mapped address dials its IPv4 one.
func TestIPv6(t *testing.T) {
	requireCM(t)
	for _, c := range []struct {
		name string
		ip   netip.Addr
	}{{"global", rxeIP6}, {"link-local", linkLocal(t)}} {
		t.Run(c.name, func(t *testing.T) {
			at := netip.AddrPortFrom(c.ip, testPort(46))
			l, err := Listen(timeout(t), at.String(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.Addr() != at {
				t.Errorf("listener's address %v, want %v", l.Addr(), at)
			}
			cli, srv := pair(t, l, nil)
			if cli.RemoteAddr() != at || srv.LocalAddr().Addr().WithZone("") != c.ip.WithZone("") ||
				!srv.RemoteAddr().Addr().Is6() || srv.RemoteAddr().Addr().Unmap().Is4() {
				t.Errorf("addresses: client %v to %v, server %v from %v", cli.LocalAddr(), cli.RemoteAddr(), srv.LocalAddr(), srv.RemoteAddr())
			}
			sendBothWays(t, cli, srv)
		})
	}

	t.Run("UD", func(t *testing.T) {
		cli, srv, cb, sb := udPairAt(t, netip.AddrPortFrom(rxeIP6, testPort(49)).String(), nil, nil)
		if !cli.LocalAddr().Addr().Is6() || cli.RemoteAddr().Addr() != rxeIP6 {
			t.Errorf("addresses: client %v to %v", cli.LocalAddr(), cli.RemoteAddr())
		}
		udPingPong(t, cli, srv, cb, sb)
	})

	t.Run("IPv4-mapped", func(t *testing.T) {
		l := listen(t, 47, nil)
		mapped := netip.AddrPortFrom(netip.AddrFrom16(rxeIP.As16()), l.Addr().Port())
		cli, _ := pairAt(t, l, mapped.String(), nil)
		if cli.RemoteAddr() != l.Addr() {
			t.Errorf("dialed %v: remote %v, want %v", mapped, cli.RemoteAddr(), l.Addr())
		}
	})

	t.Run("wildcard", func(t *testing.T) {
		any6 := netip.AddrPortFrom(netip.IPv6Unspecified(), testPort(48))
		l, err := Listen(timeout(t), any6.String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for _, ip := range []netip.Addr{rxeIP6, rxeIP} {
			cli, srv := pairAt(t, l, netip.AddrPortFrom(ip, any6.Port()).String(), nil)
			t.Logf("%v: accepted at %v from %v", ip, srv.LocalAddr(), srv.RemoteAddr())
			if srv.LocalAddr().Addr().Unmap() != ip {
				t.Errorf("dialed %v: accepted at %v", ip, srv.LocalAddr())
			}
			sendBothWays(t, cli, srv)
		}
	})
}
