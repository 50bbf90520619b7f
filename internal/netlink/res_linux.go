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
	// Kinds are the names in Counts in the kernel's order.
	Kinds []string
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
				if name == "" {
					continue
				}
				if _, dup := r.Counts[name]; !dup {
					r.Kinds = append(r.Kinds, name)
				}
				r.Counts[name] = curr
			}
		}
	}
	return r
}

// ResObject is one object of a resource dump (RDMA_NLDEV_CMD_RES_QP_GET
// and its siblings): the device it lives on and the attributes the
// kernel gave it, which differ by kind, kernel and privilege (keys and
// addresses need CAP_NET_ADMIN).
type ResObject struct {
	DevIndex uint32
	Device   string
	// Attrs holds the object's attributes by type (RDMA_NLDEV_ATTR_*);
	// of a type given twice, the first.
	Attrs map[uint16]Attr
}

// Has says whether the kernel gave the attribute typ.
func (o ResObject) Has(typ uint16) bool {
	_, ok := o.Attrs[typ]
	return ok
}

// resTables maps each resource dump command to the nested attribute
// that holds its table of objects.
var resTables = map[uint16]uint16{
	uapi.RDMA_NLDEV_CMD_RES_QP_GET:    uapi.RDMA_NLDEV_ATTR_RES_QP,
	uapi.RDMA_NLDEV_CMD_RES_CM_ID_GET: uapi.RDMA_NLDEV_ATTR_RES_CM_ID,
	uapi.RDMA_NLDEV_CMD_RES_CQ_GET:    uapi.RDMA_NLDEV_ATTR_RES_CQ,
	uapi.RDMA_NLDEV_CMD_RES_MR_GET:    uapi.RDMA_NLDEV_ATTR_RES_MR,
	uapi.RDMA_NLDEV_CMD_RES_PD_GET:    uapi.RDMA_NLDEV_ATTR_RES_PD,
	uapi.RDMA_NLDEV_CMD_RES_CTX_GET:   uapi.RDMA_NLDEV_ATTR_RES_CTX,
	uapi.RDMA_NLDEV_CMD_RES_SRQ_GET:   uapi.RDMA_NLDEV_ATTR_RES_SRQ,
}

// RDMAResourceDump lists the objects of one kind on the device with index
// devIndex, in the kernel's order: cmd is RDMA_NLDEV_CMD_RES_QP_GET,
// _CM_ID_GET, _CQ_GET, _MR_GET, _PD_GET, _CTX_GET or _SRQ_GET. A port
// other than 0 goes with the request, and the kernel then lists the QPs
// and cm_ids of that port alone, as "rdma resource show qp link DEV/PORT"
// asks; a port the device lacks gives EINVAL.
func RDMAResourceDump(cmd uint16, devIndex, port uint32) ([]ResObject, error) {
	table, ok := resTables[cmd]
	if !ok {
		return nil, fmt.Errorf("RDMA netlink command %d is not a resource dump: %w", cmd, unix.EINVAL)
	}
	b := NewBuilder(nil)
	b.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, devIndex)
	if port != 0 {
		b.Uint32(uapi.RDMA_NLDEV_ATTR_PORT_INDEX, port)
	}
	msgs, err := rdmaDo(cmd, unix.NLM_F_DUMP, b.Bytes())
	if err != nil {
		return nil, err
	}
	var out []ResObject
	for _, m := range msgs {
		out = parseResDump(out, table, m.Payload)
	}
	return out, nil
}

// parseResDump appends to out the objects of one reply of a resource
// dump whose table attribute is table. It never panics: a malformed
// payload gives fewer objects or fewer attributes.
func parseResDump(out []ResObject, table uint16, b []byte) []ResObject {
	var idx uint32
	var dev string
	var entries []Attr
	for _, a := range ParseAttrs(b) {
		switch a.Type {
		case uapi.RDMA_NLDEV_ATTR_DEV_INDEX:
			idx = a.Uint32()
		case uapi.RDMA_NLDEV_ATTR_DEV_NAME:
			dev = a.String()
		case table:
			entries = append(entries, ParseAttrs(a.Data)...)
		}
	}
	for _, e := range entries {
		o := ResObject{DevIndex: idx, Device: dev, Attrs: map[uint16]Attr{}}
		for _, a := range ParseAttrs(e.Data) {
			if _, dup := o.Attrs[a.Type]; !dup {
				o.Attrs[a.Type] = a
			}
		}
		out = append(out, o)
	}
	return out
}

// HWCounter is one hardware counter of a port: the driver's name for it
// and its value.
type HWCounter struct {
	Name  string
	Value uint64
}

// RDMAPortCounters returns the hardware counters of port on the device
// with index devIndex (RDMA_NLDEV_CMD_STAT_GET, kernel >= 5.3), in the
// driver's order: what "rdma statistic show link DEV/PORT" prints. The
// kernel answers EINVAL for a port the device lacks, and for a device
// without counters.
func RDMAPortCounters(devIndex, port uint32) ([]HWCounter, error) {
	b := NewBuilder(nil)
	b.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, devIndex)
	b.Uint32(uapi.RDMA_NLDEV_ATTR_PORT_INDEX, port)
	msgs, err := rdmaDo(uapi.RDMA_NLDEV_CMD_STAT_GET, 0, b.Bytes())
	if err != nil {
		return nil, err
	}
	var out []HWCounter
	for _, m := range msgs {
		out = parseHWCounters(out, m.Payload)
	}
	return out, nil
}

// parseHWCounters appends to out the counters of one STAT_GET reply,
// skipping an entry without a name or a value. It never panics.
func parseHWCounters(out []HWCounter, b []byte) []HWCounter {
	for _, a := range ParseAttrs(b) {
		if a.Type != uapi.RDMA_NLDEV_ATTR_STAT_HWCOUNTERS {
			continue
		}
		for _, e := range ParseAttrs(a.Data) {
			if e.Type != uapi.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY {
				continue
			}
			var c HWCounter
			var named, valued bool
			for _, f := range ParseAttrs(e.Data) {
				switch f.Type {
				case uapi.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME:
					c.Name, named = f.String(), true
				case uapi.RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE:
					c.Value, valued = f.Uint64(), len(f.Data) >= 8
				}
			}
			if named && valued {
				out = append(out, c)
			}
		}
	}
	return out
}
