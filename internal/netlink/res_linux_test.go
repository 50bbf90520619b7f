package netlink

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uapi"
)

// resPayload builds a RES_GET reply as the kernel's fill_res_info does.
func resPayload(dev string, idx uint32, counts [][2]any) []byte {
	b := NewBuilder(nil)
	b.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, idx)
	b.String(uapi.RDMA_NLDEV_ATTR_DEV_NAME, dev)
	b.Nested(uapi.RDMA_NLDEV_ATTR_RES_SUMMARY, func(b *Builder) {
		for _, c := range counts {
			b.Nested(uapi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY, func(b *Builder) {
				b.String(uapi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME, c[0].(string))
				b.Add(uapi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR, binary.NativeEndian.AppendUint64(nil, c[1].(uint64)))
			})
		}
	})
	return b.Bytes()
}

func TestParseResources(t *testing.T) {
	raw := resPayload("rxe0", 3, [][2]any{{"pd", uint64(2)}, {"cq", uint64(5)}, {"qp", uint64(1)}, {"mr", uint64(0)}})
	want := RDMAResources{Index: 3, Device: "rxe0", Counts: map[string]uint64{"pd": 2, "cq": 5, "qp": 1, "mr": 0},
		Kinds: []string{"pd", "cq", "qp", "mr"}}
	if diff := cmp.Diff(want, parseResources(raw)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Truncated anywhere: less, never a panic.
	for i := range raw {
		parseResources(raw[:i])
	}
}

func FuzzParseResources(f *testing.F) {
	f.Add(resPayload("rxe0", 1, [][2]any{{"pd", uint64(1)}, {"ctx", uint64(7)}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) { parseResources(b) })
}

// qpDump builds one RES_QP_GET reply as the kernel's fill_res_qp_entry
// does on rxe: an RC QP in RTS on port 1 owned by pid 105, and the GSI
// QP of ib_core.
func qpDump() []byte {
	b := NewBuilder(nil)
	b.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, 0)
	b.String(uapi.RDMA_NLDEV_ATTR_DEV_NAME, "rxe0")
	b.Nested(uapi.RDMA_NLDEV_ATTR_RES_QP, func(b *Builder) {
		b.Nested(uapi.RDMA_NLDEV_ATTR_RES_QP_ENTRY, func(b *Builder) {
			b.Uint32(uapi.RDMA_NLDEV_ATTR_PORT_INDEX, 1)
			b.Uint32(uapi.RDMA_NLDEV_ATTR_RES_LQPN, 17)
			b.Uint32(uapi.RDMA_NLDEV_ATTR_RES_RQPN, 18)
			b.Uint32(uapi.RDMA_NLDEV_ATTR_RES_RQ_PSN, 100)
			b.Uint32(uapi.RDMA_NLDEV_ATTR_RES_SQ_PSN, 101)
			b.Add(uapi.RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE, []byte{0})
			b.Add(uapi.RDMA_NLDEV_ATTR_RES_TYPE, []byte{2})
			b.Add(uapi.RDMA_NLDEV_ATTR_RES_STATE, []byte{3})
			b.Uint32(uapi.RDMA_NLDEV_ATTR_RES_PID, 105)
			b.Uint32(uapi.RDMA_NLDEV_ATTR_RES_PDN, 1)
		})
		b.Nested(uapi.RDMA_NLDEV_ATTR_RES_QP_ENTRY, func(b *Builder) {
			b.Uint32(uapi.RDMA_NLDEV_ATTR_PORT_INDEX, 1)
			b.Uint32(uapi.RDMA_NLDEV_ATTR_RES_LQPN, 1)
			b.Uint32(uapi.RDMA_NLDEV_ATTR_RES_SQ_PSN, 3)
			b.Add(uapi.RDMA_NLDEV_ATTR_RES_TYPE, []byte{1})
			b.Add(uapi.RDMA_NLDEV_ATTR_RES_STATE, []byte{3})
			b.String(uapi.RDMA_NLDEV_ATTR_RES_KERN_NAME, "ib_core")
		})
	})
	return b.Bytes()
}

func TestParseResDump(t *testing.T) {
	objs := parseResDump(nil, uapi.RDMA_NLDEV_ATTR_RES_QP, qpDump())
	if len(objs) != 2 {
		t.Fatalf("%d objects, want 2: %+v", len(objs), objs)
	}
	for i, want := range []struct {
		lqpn   uint32
		n      int
		hasPID bool
	}{{17, 10, true}, {1, 6, false}} {
		o := objs[i]
		if o.Device != "rxe0" || o.DevIndex != 0 || len(o.Attrs) != want.n || o.Attrs[uapi.RDMA_NLDEV_ATTR_RES_LQPN].Uint32() != want.lqpn ||
			o.Has(uapi.RDMA_NLDEV_ATTR_RES_PID) != want.hasPID {
			t.Errorf("object %d: %+v", i, o)
		}
	}
	if got := objs[1].Attrs[uapi.RDMA_NLDEV_ATTR_RES_KERN_NAME].String(); got != "ib_core" {
		t.Errorf("kernel owner %q", got)
	}
	// Another table type than the dump's: nothing.
	if objs := parseResDump(nil, uapi.RDMA_NLDEV_ATTR_RES_CQ, qpDump()); len(objs) != 0 {
		t.Errorf("a CQ table in a QP dump: %+v", objs)
	}
	raw := qpDump()
	for i := range raw {
		parseResDump(nil, uapi.RDMA_NLDEV_ATTR_RES_QP, raw[:i])
	}
}

// statReply builds a STAT_GET reply as the kernel's
// stat_get_doit_default_counter does.
func statReply(counters []HWCounter) []byte {
	b := NewBuilder(nil)
	b.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, 0)
	b.String(uapi.RDMA_NLDEV_ATTR_DEV_NAME, "rxe0")
	b.Uint32(uapi.RDMA_NLDEV_ATTR_PORT_INDEX, 1)
	b.Nested(uapi.RDMA_NLDEV_ATTR_STAT_HWCOUNTERS, func(b *Builder) {
		for _, c := range counters {
			b.Nested(uapi.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY, func(b *Builder) {
				b.String(uapi.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, c.Name)
				b.Add(uapi.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, binary.NativeEndian.AppendUint64(nil, c.Value))
			})
		}
	})
	return b.Bytes()
}

func TestParseHWCounters(t *testing.T) {
	want := []HWCounter{{"sent_pkts", 12}, {"rcvd_pkts", 12}, {"duplicate_request", 0}, {"rdma_sends", 1 << 40}}
	raw := statReply(want)
	if diff := cmp.Diff(want, parseHWCounters(nil, raw)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// An entry without its value is left out, not read as 0.
	b := NewBuilder(nil)
	b.Nested(uapi.RDMA_NLDEV_ATTR_STAT_HWCOUNTERS, func(b *Builder) {
		b.Nested(uapi.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY, func(b *Builder) {
			b.String(uapi.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, "half")
		})
	})
	if got := parseHWCounters(nil, b.Bytes()); len(got) != 0 {
		t.Errorf("an entry without a value: %+v", got)
	}
	for i := range raw {
		parseHWCounters(nil, raw[:i])
	}
}

func FuzzParseResDump(f *testing.F) {
	f.Add(qpDump(), uint16(uapi.RDMA_NLDEV_ATTR_RES_QP))
	f.Add([]byte{}, uint16(uapi.RDMA_NLDEV_ATTR_RES_CQ))
	f.Fuzz(func(t *testing.T, b []byte, table uint16) {
		for _, o := range parseResDump(nil, table, b) {
			if o.Attrs == nil {
				t.Fatal("an object without its attribute map")
			}
		}
	})
}

func FuzzParseHWCounters(f *testing.F) {
	f.Add(statReply([]HWCounter{{"sent_pkts", 1}, {"rcvd_pkts", 2}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) { parseHWCounters(nil, b) })
}
