package rdmacm

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

// join joins group from local with a udBuf of its own (receives posted
// before the join), both closed when the test ends.
func join(t *testing.T, local netip.Addr, group string, cfg *Config) (*UDConn, *udBuf) {
	t.Helper()
	b := new(udBuf)
	t.Cleanup(b.close) // after the UDConn's Close
	if cfg == nil {
		cfg = new(Config)
	}
	cfg.SetupUD = b.setup
	u, err := JoinMulticast(timeout(t), local.String(), group, cfg)
	if err != nil {
		t.Fatalf("join %s from %v: %v", group, local, err)
	}
	t.Cleanup(func() {
		b.mr.Close() // before the PD's last user goes
		b.mr = nil
		if err := u.Close(); err != nil {
			t.Errorf("close %s: %v", group, err)
		}
	})
	return u, b
}

// TestMulticast: one sender (a send-only member) and three receivers of
// an IPv4 group: every receiver gets every datagram, in
// order, from the sender's QP; a receiver that leaves gets none of the
// later ones, the others still do; the same group joined twice in one
// process reaches both.
func TestMulticast(t *testing.T) {
	requireCM(t)
	for _, c := range []struct {
		name  string
		local netip.Addr
		group string
	}{{"IPv4", rxeIP, "239.1.2.3"}} {
		t.Run(c.name, func(t *testing.T) {
			snd, sb := join(t, c.local, c.group, &Config{SendOnly: true})
			p := snd.Peer()
			if p.QPN != 0xffffff || p.QKey != udUDPQKey || p.AH == nil {
				t.Fatalf("the group as a peer: %+v, want QPN 0xffffff, Q_Key %#x and an AH", p, udUDPQKey)
			}
			if g, _ := netip.ParseAddr(c.group); snd.RemoteAddr().Addr() != g {
				t.Errorf("the group is %v, the UDConn's remote %v", g, snd.RemoteAddr())
			}
			type member struct {
				u *UDConn
				b *udBuf
			}
			var rs []member
			for range 3 {
				u, b := join(t, c.local, c.group, nil)
				rs = append(rs, member{u, b})
			}
			const count = 20
			for i := range count + 5 {
				if i == count {
					if err := rs[2].u.Leave(); err != nil {
						t.Fatal(err)
					}
				}
				msg := fmt.Appendf(nil, "datagram %2d to %s", i, c.group)
				sb.send(t, snd, p, msg)
				for k, r := range rs {
					if k == 2 && i >= count {
						continue
					}
					wc, slot := r.b.recv(t, r.u)
					if wc.SrcQP != snd.QP().QPN() || !bytes.Equal(slot[uverbs.GRHSize:][:len(msg)], msg) {
						t.Fatalf("receiver %d, datagram %d: %+v %q", k, i, wc, slot[uverbs.GRHSize:][:len(msg)])
					}
					if err := r.b.postRecv(r.u, int(wc.WRID)); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The others got the last five: had the one that left, it
			// would have by now (one packet reaches every member at once).
			var wcs [4]cq.WC
			if n, err := rs[2].u.CQ().Poll(wcs[:]); n != 0 || err != nil {
				t.Errorf("the receiver that left got %d more (%v): %+v", n, err, wcs[:n])
			}
			if err := rs[2].u.Leave(); !errors.Is(err, ErrClosed) {
				t.Errorf("a second Leave: %v, want ErrClosed", err)
			}
		})
	}
}

// TestMulticastIPv6: the kernel joins no IPv6 group on a RoCE v2 port
// (cma_iboe_join_multicast's ENOTSUPP), and JoinMulticast says so.
func TestMulticastIPv6(t *testing.T) {
	requireCM(t)
	for _, sendOnly := range []bool{false, true} {
		u, err := JoinMulticast(timeout(t), rxeIP6.String(), "ff0e::1:2:3", &Config{SendOnly: sendOnly})
		if !errors.Is(err, ErrNotSupported) {
			if u != nil {
				u.Close()
			}
			t.Errorf("join ff0e::1:2:3 (send only %v): %v, want ErrNotSupported", sendOnly, err)
		}
		t.Logf("send only %v: %v", sendOnly, err)
	}
}

// TestMulticastMisuse: a group that is not multicast, families that
// differ, and a Leave of a UDConn that joined nothing are EINVAL.
func TestMulticastMisuse(t *testing.T) {
	requireCM(t)
	for _, c := range []struct{ local, group string }{
		{rxeIP.String(), "192.0.2.99"},
		{rxeIP.String(), "ff0e::1"},
		{rxeIP6.String(), "239.1.2.3"},
		{"nonsense", "239.1.2.3"},
	} {
		if u, err := JoinMulticast(timeout(t), c.local, c.group, nil); !errors.Is(err, errInvalid) {
			if u != nil {
				u.Close()
			}
			t.Errorf("join %s from %s: %v, want EINVAL", c.group, c.local, err)
		}
	}
	cli, _, _, _ := udPair(t, 55, nil, nil)
	if err := cli.Leave(); !errors.Is(err, errInvalid) {
		t.Errorf("Leave of a UDConn that joined nothing: %v, want EINVAL", err)
	}
}
