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
	want := RDMAResources{Index: 3, Device: "rxe0", Counts: map[string]uint64{"pd": 2, "cq": 5, "qp": 1, "mr": 0}}
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
