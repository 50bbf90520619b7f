package netlink

import (
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What the VM's two-host tests need of rtnetlink: a link set down and up
// mid-transfer, the policy routes that send traffic between two local
// addresses across a veth pair instead of the loopback, and netem on a
// veth end to drop, duplicate, reorder, corrupt and delay its packets.

// LinkSetDown clears IFF_UP on the netdev name.
func LinkSetDown(name string) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("ip link set %s down: %w", name, err)
	}
	b := NewBuilder(ifinfo(int32(ifi.Index), 0, unix.IFF_UP))
	if err := routeDo(unix.RTM_NEWLINK, 0, b.Bytes()); err != nil {
		return fmt.Errorf("ip link set %s down: %w", name, err)
	}
	return nil
}

// RouteAdd adds a route to dst out of the netdev dev, in routing table
// table, with the link's scope: no gateway.
func RouteAdd(dst netip.Prefix, dev string, table uint32) error {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return fmt.Errorf("ip route add %s dev %s table %d: %w", dst, dev, table, err)
	}
	if err := routeDo(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, routeMsg(dst, int32(ifi.Index), table)); err != nil {
		return fmt.Errorf("ip route add %s dev %s table %d: %w", dst, dev, table, err)
	}
	return nil
}

func routeMsg(dst netip.Prefix, ifindex int32, table uint32) []byte {
	family, alen := unix.AF_INET, 4
	if dst.Addr().Is6() {
		family, alen = unix.AF_INET6, 16
	}
	m := unix.RtMsg{Family: uint8(family), Dst_len: uint8(dst.Bits()), Table: unix.RT_TABLE_UNSPEC,
		Protocol: unix.RTPROT_STATIC, Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST}
	b := NewBuilder(unsafe.Slice((*byte)(unsafe.Pointer(&m)), unix.SizeofRtMsg))
	b.Add(unix.RTA_DST, dst.Addr().AsSlice()[:alen])
	b.Uint32(unix.RTA_OIF, uint32(ifindex))
	b.Uint32(unix.RTA_TABLE, table)
	return b.Bytes()
}

// A Rule is an IPv4 policy routing rule: packets that match look up
// Table (unix.RT_TABLE_LOCAL is the local table's). Iif "lo" matches what
// the host itself sends; Dst, if valid, matches a destination.
type Rule struct {
	Pref  uint32
	Iif   string
	Dst   netip.Prefix
	Table uint32
}

// RuleAdd adds the rule r; RuleDel deletes the rule that matches it.
func RuleAdd(r Rule) error {
	if err := routeDo(unix.RTM_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, ruleMsg(r)); err != nil {
		return fmt.Errorf("ip rule add %s: %w", r, err)
	}
	return nil
}

// RuleDel deletes the rule that matches r.
func RuleDel(r Rule) error {
	if err := routeDo(unix.RTM_DELRULE, 0, ruleMsg(r)); err != nil {
		return fmt.Errorf("ip rule del %s: %w", r, err)
	}
	return nil
}

func (r Rule) String() string {
	s := fmt.Sprintf("pref %d", r.Pref)
	if r.Iif != "" {
		s += " iif " + r.Iif
	}
	if r.Dst.IsValid() {
		s += " to " + r.Dst.String()
	}
	return s + fmt.Sprintf(" lookup %d", r.Table)
}

// ruleMsg is a struct fib_rule_hdr (the layout of struct rtmsg) and its
// attributes.
func ruleMsg(r Rule) []byte {
	m := unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_UNSPEC, Type: unix.FR_ACT_TO_TBL}
	if r.Dst.IsValid() {
		m.Dst_len = uint8(r.Dst.Bits())
	}
	b := NewBuilder(unsafe.Slice((*byte)(unsafe.Pointer(&m)), unix.SizeofRtMsg))
	b.Uint32(unix.FRA_PRIORITY, r.Pref)
	b.Uint32(unix.FRA_TABLE, r.Table)
	if r.Iif != "" {
		b.String(unix.FRA_IIFNAME, r.Iif)
	}
	if r.Dst.IsValid() {
		b.Add(unix.FRA_DST, r.Dst.Addr().AsSlice())
	}
	return b.Bytes()
}

// Netem is what a netem qdisc does to the packets a netdev sends, as
// tc-netem(8) says it: each probability from 0 to 1.
type Netem struct {
	Delay, Jitter time.Duration
	Loss          float64
	Duplicate     float64
	Corrupt       float64
	// Reorder sends that share of packets at once, the rest after Delay
	// (which must be set).
	Reorder float64
	// Limit is the most packets the qdisc holds; 0 means tc's 1000 (the
	// kernel takes 0 as 0, and drops everything).
	Limit uint32
}

// String gives n as tc-netem(8) takes it: "delay 10ms 5ms loss 5%".
func (n Netem) String() string {
	var s []string
	if n.Delay > 0 {
		d := "delay " + n.Delay.String()
		if n.Jitter > 0 {
			d += " " + n.Jitter.String()
		}
		s = append(s, d)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss", n.Loss}, {"duplicate", n.Duplicate}, {"corrupt", n.Corrupt}, {"reorder", n.Reorder}} {
		if p.v > 0 {
			s = append(s, fmt.Sprintf("%s %g%%", p.name, p.v*100))
		}
	}
	if n.Limit > 0 {
		s = append(s, fmt.Sprintf("limit %d", n.Limit))
	}
	return strings.Join(s, " ")
}

// NetemSet puts netem with n at the root of dev's egress, replacing
// what is there; NetemDel takes it away.
func NetemSet(dev string, n Netem) error {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return fmt.Errorf("tc qdisc replace dev %s root netem: %w", dev, err)
	}
	if err := routeDo(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, netemMsg(int32(ifi.Index), n)); err != nil {
		return fmt.Errorf("tc qdisc replace dev %s root netem %v: %w", dev, n, err)
	}
	return nil
}

// NetemDel takes the root qdisc of dev away: the default comes back.
func NetemDel(dev string) error {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return fmt.Errorf("tc qdisc del dev %s root: %w", dev, err)
	}
	if err := routeDo(unix.RTM_DELQDISC, 0, tcmsg(int32(ifi.Index))); err != nil {
		return fmt.Errorf("tc qdisc del dev %s root: %w", dev, err)
	}
	return nil
}

// tcHRoot is TC_H_ROOT, <linux/pkt_sched.h>: the egress root.
const tcHRoot = 0xffffffff

// The netem attributes inside TCA_OPTIONS, after struct tc_netem_qopt
// (<linux/pkt_sched.h>).
const (
	tcaNetemCorr      = 1
	tcaNetemReorder   = 3
	tcaNetemCorrupt   = 4
	tcaNetemLatency64 = 10
	tcaNetemJitter64  = 11
)

// tcmsg is a struct tcmsg for the egress root of ifindex.
func tcmsg(ifindex int32) []byte {
	b := make([]byte, 20) // family, 3 pad, ifindex, handle, parent, info
	binary.NativeEndian.PutUint32(b[4:], uint32(ifindex))
	binary.NativeEndian.PutUint32(b[12:], tcHRoot)
	return b
}

// prob is a probability as netem takes it: a share of 2³²-1.
func prob(p float64) uint32 {
	return uint32(math.Round(min(max(p, 0), 1) * math.MaxUint32))
}

// probCorr is a struct tc_netem_reorder or tc_netem_corrupt: the
// probability, and no correlation.
func probCorr(p float64) []byte {
	return binary.NativeEndian.AppendUint32(binary.NativeEndian.AppendUint32(nil, prob(p)), 0)
}

// netemMsg encodes n as tc does: struct tc_netem_qopt (latency, limit,
// loss, gap, duplicate, jitter: u32s; the delays 0 there, in
// nanoseconds in LATENCY64 and JITTER64 instead), then the attributes
// for reordering and corruption, all in TCA_OPTIONS.
func netemMsg(ifindex int32, n Netem) []byte {
	b := NewBuilder(tcmsg(ifindex))
	b.String(unix.TCA_KIND, "netem")
	limit := n.Limit
	if limit == 0 {
		limit = 1000
	}
	var gap uint32
	if n.Reorder > 0 {
		gap = 1 // tc's: reorder every packet the probability picks
	}
	b.Wrap(unix.TCA_OPTIONS, func(b *Builder) {
		// struct tc_netem_qopt: latency, limit, loss, gap, duplicate, jitter.
		for _, v := range []uint32{0, limit, prob(n.Loss), gap, prob(n.Duplicate), 0} {
			b.b = binary.NativeEndian.AppendUint32(b.b, v)
		}
		if n.Reorder > 0 {
			b.Add(tcaNetemReorder, probCorr(n.Reorder))
		}
		if n.Corrupt > 0 {
			b.Add(tcaNetemCorrupt, probCorr(n.Corrupt))
		}
		if n.Delay > 0 {
			b.Add(tcaNetemLatency64, binary.NativeEndian.AppendUint64(nil, uint64(n.Delay)))
		}
		if n.Jitter > 0 {
			b.Add(tcaNetemJitter64, binary.NativeEndian.AppendUint64(nil, uint64(n.Jitter)))
		}
	})
	return b.Bytes()
}
