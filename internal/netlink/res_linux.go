package netlink

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// RDMAResources is what RDMA_NLDEV_CMD_RES_GET reports about one device,
// as "rdma resource show" prints it: how many objects of each kind the
// kernel tracks on it, for every process and the kernel together.
type RDMAResources struct {
	Index  uint32
	Device string
	// Counts maps the kernel's name of a kind ("pd", "cq", "qp", "mr",
	// "cm_id", "ctx", "srq") to how many exist now.
	Counts map[string]uint64
}

// RDMAResourceSummary lists the resource counts of every RDMA device.
func RDMAResourceSummary() ([]RDMAResources, error) {
	msgs, err := rdmaDo(uapi.RDMA_NLDEV_CMD_RES_GET, unix.NLM_F_DUMP, nil)
	if err != nil {
		return nil, fmt.Errorf("rdma resource show: %w", err)
	}
	out := make([]RDMAResources, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, parseResources(m.Payload))
	}
	return out, nil
}

// parseResources decodes one device's RES_GET reply; it never panics on
// a malformed payload, it just reports less.
func parseResources(b []byte) RDMAResources {
	r := RDMAResources{Counts: map[string]uint64{}}
	for _, a := range ParseAttrs(b) {
		switch a.Type {
		case uapi.RDMA_NLDEV_ATTR_DEV_INDEX:
			r.Index = a.Uint32()
		case uapi.RDMA_NLDEV_ATTR_DEV_NAME:
			r.Device = a.String()
		case uapi.RDMA_NLDEV_ATTR_RES_SUMMARY:
			for _, e := range ParseAttrs(a.Data) {
				if e.Type != uapi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY {
					continue
				}
				var name string
				var curr uint64
				for _, f := range ParseAttrs(e.Data) {
					switch f.Type {
					case uapi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME:
						name = f.String()
					case uapi.RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR:
						curr = f.Uint64()
					}
				}
				if name != "" {
					r.Counts[name] = curr
				}
			}
		}
	}
	return r
}
