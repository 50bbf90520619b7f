package netlink

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// netem's message is tc's: `tc qdisc replace dev X root netem delay 10ms
// 5ms loss 5% duplicate 1% reorder 25% corrupt 0.1%` encodes the same
// struct tc_netem_qopt (loss 5% is 214748365 of 2³²-1) and attributes.
func TestNetemMsg(t *testing.T) {
	raw := netemMsg(7, Netem{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond,
		Loss: 0.05, Duplicate: 0.01, Reorder: 0.25, Corrupt: 0.001})
	if got := binary.NativeEndian.Uint32(raw[4:]); got != 7 {
		t.Errorf("tcmsg ifindex %d, want 7", got)
	}
	if got := binary.NativeEndian.Uint32(raw[12:]); got != tcHRoot {
		t.Errorf("tcmsg parent %#x, want TC_H_ROOT", got)
	}
	attrs := ParseAttrs(raw[20:])
	if len(attrs) != 2 || attrs[0].Type != unix.TCA_KIND || attrs[0].String() != "netem" || attrs[1].Type != unix.TCA_OPTIONS {
		t.Fatalf("attributes %+v, want TCA_KIND netem and TCA_OPTIONS", attrs)
	}
	opt := attrs[1].Data
	var qopt [6]uint32
	for i := range qopt {
		qopt[i] = binary.NativeEndian.Uint32(opt[4*i:])
	}
	// latency, limit, loss, gap, duplicate, jitter
	if want := [6]uint32{0, 1000, 214748365, 1, 42949673, 0}; qopt != want {
		t.Errorf("tc_netem_qopt %v, want %v", qopt, want)
	}
	got := map[uint16][]byte{}
	for _, a := range ParseAttrs(opt[24:]) {
		got[a.Type] = a.Data
	}
	u32s := func(v ...uint32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.NativeEndian.AppendUint32(b, x)
		}
		return b
	}
	// The attribute numbers are <linux/pkt_sched.h>'s, written out: a
	// test that named the package's own constants would pass with wrong
	// ones (8 and 9, RATE64 and PAD, once stood for the delays).
	want := map[uint16][]byte{
		3:  u32s(1073741824, 0),                                                // TCA_NETEM_REORDER
		4:  u32s(4294967, 0),                                                   // TCA_NETEM_CORRUPT
		10: binary.NativeEndian.AppendUint64(nil, uint64(10*time.Millisecond)), // TCA_NETEM_LATENCY64
		11: binary.NativeEndian.AppendUint64(nil, uint64(5*time.Millisecond)),  // TCA_NETEM_JITTER64
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("netem attributes (-want +got):\n%s", diff)
	}
	// Nothing asked for, nothing sent but the limit.
	attrs = ParseAttrs(netemMsg(7, Netem{Limit: 50})[20:])
	if opt := attrs[1].Data; len(opt) != 24 || binary.NativeEndian.Uint32(opt[4:]) != 50 {
		t.Errorf("netem with a limit only: options %x", opt)
	}
}

func TestNetemString(t *testing.T) {
	for _, c := range []struct {
		n    Netem
		want string
	}{
		{Netem{}, ""},
		{Netem{Loss: 0.05}, "loss 5%"},
		{Netem{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, Duplicate: 0.01, Reorder: 0.25, Limit: 50}, "delay 10ms 5ms duplicate 1% reorder 25% limit 50"},
	} {
		if got := c.n.String(); got != c.want {
			t.Errorf("%#v: %q, want %q", c.n, got, c.want)
		}
	}
}

func TestRuleAndRouteMsg(t *testing.T) {
	dst := netip.MustParsePrefix("192.0.2.2/32")
	raw := ruleMsg(Rule{Pref: 10, Iif: "lo", Dst: dst, Table: 100})
	if raw[0] != unix.AF_INET || raw[1] != 32 || raw[7] != unix.FR_ACT_TO_TBL {
		t.Errorf("fib_rule_hdr %x", raw[:unix.SizeofRtMsg])
	}
	got := map[uint16]string{}
	for _, a := range ParseAttrs(raw[unix.SizeofRtMsg:]) {
		got[a.Type] = string(a.Data)
	}
	want := map[uint16]string{
		unix.FRA_PRIORITY: string(binary.NativeEndian.AppendUint32(nil, 10)),
		unix.FRA_TABLE:    string(binary.NativeEndian.AppendUint32(nil, 100)),
		unix.FRA_IIFNAME:  "lo\x00",
		unix.FRA_DST:      "\xc0\x00\x02\x02",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rule attributes (-want +got):\n%s", diff)
	}
	raw = routeMsg(dst, 3, 100)
	if raw[0] != unix.AF_INET || raw[1] != 32 || raw[6] != unix.RT_SCOPE_LINK || raw[7] != unix.RTN_UNICAST {
		t.Errorf("rtmsg %x", raw[:unix.SizeofRtMsg])
	}
	if s := (Rule{Pref: 0, Table: unix.RT_TABLE_LOCAL}).String(); s != "pref 0 lookup 255" {
		t.Errorf("Rule.String() = %q", s)
	}
}
