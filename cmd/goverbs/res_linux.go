package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/uapi"
)

// resTo runs res with args, printing to stdout and its errors to stderr,
// and returns the exit status.
func resTo(stdout, stderr io.Writer, args []string) int {
	c, err := parseRes(args)
	if err != nil {
		return resUsageError(stderr, err)
	}
	if c.help {
		fmt.Fprintln(stdout, resUsage)
		return 0
	}
	what := "rdma resource show"
	if c.kind != nil {
		what += " " + c.kind.name
	}
	devs, err := netlink.RDMADevices()
	if err != nil {
		return failTo(stderr, "%s: %v", what, err)
	}
	if c.dev != "" {
		devs = devsNamed(devs, c.dev)
		if len(devs) == 0 {
			return failTo(stderr, "%s: %s: no such RDMA device", what, c.dev)
		}
		if c.kind != nil && !c.allPorts && c.port > devs[0].Ports {
			return failTo(stderr, "%s: %s has no port %d", what, c.dev, c.port)
		}
	}
	var out strings.Builder
	if c.kind == nil {
		if err := resSummary(&out, devs); err != nil {
			return failTo(stderr, "%s: %v", what, err)
		}
	} else if err := resObjects(&out, c, devs, procComm); err != nil {
		return failTo(stderr, "%s: %v", what, err)
	}
	io.WriteString(stdout, out.String())
	return 0
}

// devsNamed returns the device of devs named name, if there is one.
func devsNamed(devs []netlink.RDMADevice, name string) []netlink.RDMADevice {
	for _, d := range devs {
		if d.Name == name {
			return []netlink.RDMADevice{d}
		}
	}
	return nil
}

// resSummary writes one line per device of devs: "0: rxe0: pd 1 cq 2 … ".
func resSummary(w io.Writer, devs []netlink.RDMADevice) error {
	all, err := netlink.RDMAResourceSummary()
	if err != nil {
		return err
	}
	for _, d := range devs {
		for _, r := range all {
			if r.Index == d.Index {
				io.WriteString(w, summaryLine(r))
			}
		}
	}
	return nil
}

// summaryLine is one device's line of "rdma resource show", newline and
// the space before it included, as rdma prints every field with one
// after it.
func summaryLine(r netlink.RDMAResources) string {
	s := fmt.Sprintf("%d: %s: ", r.Index, r.Device)
	for _, k := range r.Kinds {
		s += fmt.Sprintf("%s %d ", k, r.Counts[k])
	}
	return s + "\n"
}

// resDumps are the kinds' netlink commands and their line printers.
var resDumps = map[string]struct {
	cmd  uint16
	line func(o netlink.ResObject, port uint32, fs resFilters, comm commFunc) (string, bool)
}{
	"qp":    {uapi.RDMA_NLDEV_CMD_RES_QP_GET, qpLine},
	"cm_id": {uapi.RDMA_NLDEV_CMD_RES_CM_ID_GET, cmIDLine},
	"cq":    {uapi.RDMA_NLDEV_CMD_RES_CQ_GET, cqLine},
	"mr":    {uapi.RDMA_NLDEV_CMD_RES_MR_GET, mrLine},
	"pd":    {uapi.RDMA_NLDEV_CMD_RES_PD_GET, pdLine},
	"ctx":   {uapi.RDMA_NLDEV_CMD_RES_CTX_GET, ctxLine},
}

// commFunc names the process pid ("/proc/PID/comm"), if it still runs.
type commFunc func(pid uint32) (string, bool)

func procComm(pid uint32) (string, bool) {
	if pid == 0 {
		return "", false
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm")
	if err != nil {
		return "", false
	}
	s, _, _ := strings.Cut(string(b), "\n")
	return s, true
}

// resObjects writes the lines of c's kind on devs. As rdma does, it asks
// the kernel once per device for the per-device kinds, and once per port
// (0, the objects without a port yet, then 1 up, or the one port named)
// for QPs and cm_ids, so those come ordered by port.
func resObjects(w io.Writer, c resCmd, devs []netlink.RDMADevice, comm commFunc) error {
	d := resDumps[c.kind.name]
	for _, dev := range devs {
		ports := []uint32{0}
		if c.kind.link {
			ports = ports[:0]
			if c.allPorts {
				for p := uint32(0); p <= dev.Ports; p++ {
					ports = append(ports, p)
				}
			} else {
				ports = append(ports, c.port)
			}
		}
		for _, p := range ports {
			objs, err := netlink.RDMAResourceDump(d.cmd, dev.Index, p)
			if err != nil {
				return fmt.Errorf("%s: %w", dev.Name, err)
			}
			for _, o := range objs {
				if s, ok := d.line(o, p, c.filters, comm); ok {
					io.WriteString(w, s)
				}
			}
		}
	}
	return nil
}

// Names of the kernel's numbers, as rdma prints them.
var (
	qpTypeNames    = []string{"SMI", "GSI", "RC", "UC", "UD", "RAW_IPV6", "RAW_ETHERTYPE", "UNKNOWN", "RAW_PACKET", "XRC_INI", "XRC_TGT"}
	qpStateNames   = []string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}
	pathMigNames   = []string{"MIGRATED", "REARM", "ARMED"}
	pollCtxNames   = []string{"DIRECT", "SOFTIRQ", "WORKQUEUE", "UNBOUND_WORKQUEUE"}
	cmIDStateNames = []string{"IDLE", "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_QUERY", "ROUTE_RESOLVED",
		"CONNECT", "DISCONNECT", "ADDR_BOUND", "LISTEN", "DEVICE_REMOVAL", "DESTROYING"}
)

func qpTypeName(t uint8) string {
	if t == 0xff {
		return "DRIVER"
	}
	return stateName(qpTypeNames, t)
}

// psName names a port space (enum rdma_ucm_port_space); rdma calls
// RDMA_PS_IB "IPoIB" too.
func psName(ps uint32) string {
	switch ps {
	case uapi.RDMA_PS_IPOIB, uapi.RDMA_PS_IB:
		return "IPoIB"
	case uapi.RDMA_PS_TCP:
		return "TCP"
	case uapi.RDMA_PS_UDP:
		return "UDP"
	}
	return "---"
}

// resLine builds one line: every field is followed by a space, as rdma
// prints them.
type resLine struct{ strings.Builder }

func (l *resLine) add(format string, args ...any) { fmt.Fprintf(l, format+" ", args...) }

func (l *resLine) end() string { return l.String() + "\n" }

func attrU32(o netlink.ResObject, typ uint16) (uint32, bool) {
	a, ok := o.Attrs[typ]
	return a.Uint32(), ok
}

func attrU64(o netlink.ResObject, typ uint16) (uint64, bool) {
	a, ok := o.Attrs[typ]
	return a.Uint64(), ok
}

func attrU8(o netlink.ResObject, typ uint16) (uint8, bool) {
	a, ok := o.Attrs[typ]
	return a.Uint8(), ok
}

// owner reads who holds an object: the pid of a process and its name, or
// the name of a kernel user in brackets ("[ib_core]"); ok is false when
// neither is known. rdma cuts the name at 17 bytes.
func owner(o netlink.ResObject, comm commFunc) (pid uint32, hasPID bool, name string, ok bool) {
	if pid, hasPID = attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_PID); hasPID {
		name, ok = comm(pid)
	} else if a, kern := o.Attrs[uapi.RDMA_NLDEV_ATTR_RES_KERN_NAME]; kern {
		name, ok = "["+a.String()+"]", true
	}
	if len(name) > 17 {
		name = name[:17]
	}
	return pid, hasPID, name, ok
}

// addOwner adds "pid N" and "comm NAME" where known.
func (l *resLine) addOwner(pid uint32, hasPID bool, name string, ok bool) {
	if hasPID {
		l.add("pid %d", pid)
	}
	if ok {
		l.add("comm %s", name)
	}
}

// addLink adds "link DEV/PORT", or "link DEV/-" for an object with no
// port yet.
func (l *resLine) addLink(o netlink.ResObject, dev string) {
	if p, ok := attrU32(o, uapi.RDMA_NLDEV_ATTR_PORT_INDEX); ok {
		l.add("link %s/%d", dev, p)
	} else {
		l.add("link %s/-", dev)
	}
}

// addU32 adds "name N" if the kernel gave the attribute.
func (l *resLine) addU32(o netlink.ResObject, name string, typ uint16) {
	if v, ok := attrU32(o, typ); ok {
		l.add("%s %d", name, v)
	}
}

// addKey adds "name 0xN" if the kernel gave the attribute (keys, IOVAs).
func (l *resLine) addKey(o netlink.ResObject, name string, typ uint16, v uint64) {
	if o.Has(typ) {
		l.add("%s %#x", name, v)
	}
}

// qpLine is a QP's line of "rdma resource show qp", or false when the
// filters leave it out or it belongs to another port than the one asked
// (port 0 asks for QPs with no port yet). An entry without its
// mandatory attributes (QP number, SQ PSN, type, state) is left out too:
// rdma stops its listing there.
func qpLine(o netlink.ResObject, port uint32, fs resFilters, comm commFunc) (string, bool) {
	lqpn, ok1 := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_LQPN)
	sqPSN, ok2 := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_SQ_PSN)
	typ, ok3 := attrU8(o, uapi.RDMA_NLDEV_ATTR_RES_TYPE)
	state, ok4 := attrU8(o, uapi.RDMA_NLDEV_ATTR_RES_STATE)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return "", false
	}
	if p, _ := attrU32(o, uapi.RDMA_NLDEV_ATTR_PORT_INDEX); p != port {
		return "", false
	}
	pdn, hasPDN := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_PDN)
	rqpn, hasRQPN := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_RQPN)
	rqPSN, hasRQPSN := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_RQ_PSN)
	mig, hasMig := attrU8(o, uapi.RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE)
	pid, hasPID, name, named := owner(o, comm)
	if fs.dropNum("lqpn", uint64(lqpn), true) || fs.dropNum("pdn", uint64(pdn), hasPDN) ||
		fs.dropNum("rqpn", uint64(rqpn), hasRQPN) || fs.dropNum("rq-psn", uint64(rqPSN), hasRQPSN) ||
		fs.dropNum("sq-psn", uint64(sqPSN), true) || fs.dropStr("path-mig-state", stateName(pathMigNames, mig)) ||
		fs.dropStr("type", qpTypeName(typ)) || fs.dropStr("state", stateName(qpStateNames, state)) ||
		fs.dropNum("pid", uint64(pid), hasPID) {
		return "", false
	}
	var l resLine
	l.addLink(o, o.Device)
	l.add("lqpn %d", lqpn)
	if hasRQPN {
		l.add("rqpn %d", int32(rqpn))
	}
	l.add("type %s", qpTypeName(typ))
	l.add("state %s", stateName(qpStateNames, state))
	if hasRQPSN {
		l.add("rq-psn %d", int32(rqPSN))
	}
	l.add("sq-psn %d", sqPSN)
	if hasMig {
		l.add("path-mig-state %s", stateName(pathMigNames, mig))
	}
	l.addU32(o, "pdn", uapi.RDMA_NLDEV_ATTR_RES_PDN)
	l.addOwner(pid, hasPID, name, named)
	return l.end(), true
}

// cmIDLine is an rdma_cm ID's line of "rdma resource show cm_id", or
// false when the filters leave it out or it belongs to another port than
// the one asked. As in rdma, an ID with no port yet passes under any
// port; the kernel, asked for one port, lists that port's IDs alone. An
// entry without its state or port space is left out.
func cmIDLine(o netlink.ResObject, port uint32, fs resFilters, comm commFunc) (string, bool) {
	state, ok1 := attrU8(o, uapi.RDMA_NLDEV_ATTR_RES_STATE)
	ps, ok2 := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_PS)
	if !ok1 || !ok2 {
		return "", false
	}
	if p, _ := attrU32(o, uapi.RDMA_NLDEV_ATTR_PORT_INDEX); p != 0 && p != port {
		return "", false
	}
	lqpn, hasLQPN := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_LQPN)
	typ, hasType := attrU8(o, uapi.RDMA_NLDEV_ATTR_RES_TYPE)
	src, srcPort, hasSrc, srcOK := sockaddr(o, uapi.RDMA_NLDEV_ATTR_RES_SRC_ADDR)
	dst, dstPort, hasDst, dstOK := sockaddr(o, uapi.RDMA_NLDEV_ATTR_RES_DST_ADDR)
	if !srcOK || !dstOK { // an address of a family rdma cannot print: it skips the ID
		return "", false
	}
	pid, hasPID, name, named := owner(o, comm)
	cmIDN, hasIDN := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_CM_IDN)
	if fs.dropNum("lqpn", uint64(lqpn), hasLQPN) || fs.dropStr("qp-type", qpTypeName(typ)) ||
		fs.dropStr("ps", psName(ps)) || fs.dropStr("state", stateName(cmIDStateNames, state)) ||
		fs.dropStr("src-addr", src) || fs.dropNum("src-port", uint64(srcPort), hasSrc) ||
		fs.dropStr("dst-addr", dst) || fs.dropNum("dst-port", uint64(dstPort), hasDst) ||
		fs.dropNum("pid", uint64(pid), hasPID) || fs.dropNum("cm-idn", uint64(cmIDN), hasIDN) {
		return "", false
	}
	var l resLine
	l.addLink(o, o.Device)
	l.addU32(o, "cm-idn", uapi.RDMA_NLDEV_ATTR_RES_CM_IDN)
	l.addU32(o, "lqpn", uapi.RDMA_NLDEV_ATTR_RES_LQPN)
	if hasType {
		l.add("qp-type %s", qpTypeName(typ))
	}
	l.add("state %s", stateName(cmIDStateNames, state))
	l.add("ps %s", psName(ps))
	l.addOwner(pid, hasPID, name, named)
	if hasSrc {
		l.add("src-addr %s:%d", src, srcPort)
	}
	if hasDst {
		l.add("dst-addr %s:%d", dst, dstPort)
	}
	return l.end(), true
}

// sockaddr reads an address attribute (struct __kernel_sockaddr_storage):
// its text as inet_ntop writes it and its port. present says the kernel
// gave it; ok is false for a family other than IPv4 and IPv6.
func sockaddr(o netlink.ResObject, typ uint16) (addr string, port uint16, present, ok bool) {
	a, present := o.Attrs[typ]
	if !present {
		return "", 0, false, true
	}
	b := a.Data
	if len(b) < 4 {
		return "", 0, true, false
	}
	port = binary.BigEndian.Uint16(b[2:])
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) < 8 {
			return "", 0, true, false
		}
		return netip.AddrFrom4([4]byte(b[4:8])).String(), port, true, true
	case unix.AF_INET6:
		if len(b) < 24 {
			return "", 0, true, false
		}
		return ntop6([16]byte(b[8:24])), port, true, true
	}
	return "", 0, true, false
}

// ntop6 writes an IPv6 address as glibc's inet_ntop does, which differs
// from netip's form only for IPv4-compatible addresses (::a.b.c.d).
func ntop6(a [16]byte) string {
	var zero [10]byte
	if [10]byte(a[:10]) == zero && a[10] == 0 && a[11] == 0 && (a[12] != 0 || a[13] != 0) {
		return "::" + netip.AddrFrom4([4]byte(a[12:])).String()
	}
	return netip.AddrFrom16(a).String()
}

// cqLine is a CQ's line of "rdma resource show cq", or false when the
// filters leave it out; an entry without its size or use count is left
// out.
func cqLine(o netlink.ResObject, _ uint32, fs resFilters, comm commFunc) (string, bool) {
	cqe, ok1 := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_CQE)
	users, ok2 := attrU64(o, uapi.RDMA_NLDEV_ATTR_RES_USECNT)
	if !ok1 || !ok2 {
		return "", false
	}
	poll, hasPoll := attrU8(o, uapi.RDMA_NLDEV_ATTR_RES_POLL_CTX)
	pid, hasPID, name, named := owner(o, comm)
	cqn, hasCQN := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_CQN)
	ctxn, hasCtxn := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_CTXN)
	if fs.dropNum("users", users, true) || fs.dropStr("poll-ctx", stateName(pollCtxNames, poll)) ||
		fs.dropNum("pid", uint64(pid), hasPID) || fs.dropNum("cqn", uint64(cqn), hasCQN) ||
		fs.dropNum("ctxn", uint64(ctxn), hasCtxn) {
		return "", false
	}
	var l resLine
	l.add("dev %s", o.Device)
	l.addU32(o, "cqn", uapi.RDMA_NLDEV_ATTR_RES_CQN)
	l.add("cqe %d", cqe)
	l.add("users %d", users)
	if hasPoll {
		l.add("poll-ctx %s", stateName(pollCtxNames, poll))
	}
	if dim, ok := attrU8(o, uapi.RDMA_NLDEV_ATTR_DEV_DIM); ok && dim <= 1 {
		l.add("adaptive-moderation %s", map[uint8]string{0: "off", 1: "on"}[dim])
	}
	l.addU32(o, "ctxn", uapi.RDMA_NLDEV_ATTR_RES_CTXN)
	l.addOwner(pid, hasPID, name, named)
	return l.end(), true
}

// mrLine is an MR's line of "rdma resource show mr", or false when the
// filters leave it out; an entry without its length is left out. The
// kernel gives the keys and the IOVA to CAP_NET_ADMIN only.
func mrLine(o netlink.ResObject, _ uint32, fs resFilters, comm commFunc) (string, bool) {
	mrlen, ok := attrU64(o, uapi.RDMA_NLDEV_ATTR_RES_MRLEN)
	if !ok {
		return "", false
	}
	rkey, _ := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_RKEY)
	lkey, _ := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_LKEY)
	iova, _ := attrU64(o, uapi.RDMA_NLDEV_ATTR_RES_IOVA)
	pid, hasPID, name, named := owner(o, comm)
	mrn, hasMRN := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_MRN)
	pdn, hasPDN := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_PDN)
	// rdma 6.1 accepts rkey and lkey filters and applies neither.
	if fs.dropNum("mrlen", mrlen, true) || fs.dropNum("pid", uint64(pid), hasPID) ||
		fs.dropNum("mrn", uint64(mrn), hasMRN) || fs.dropNum("pdn", uint64(pdn), hasPDN) {
		return "", false
	}
	var l resLine
	l.add("dev %s", o.Device)
	l.addU32(o, "mrn", uapi.RDMA_NLDEV_ATTR_RES_MRN)
	l.addKey(o, "rkey", uapi.RDMA_NLDEV_ATTR_RES_RKEY, uint64(rkey))
	l.addKey(o, "lkey", uapi.RDMA_NLDEV_ATTR_RES_LKEY, uint64(lkey))
	l.addKey(o, "iova", uapi.RDMA_NLDEV_ATTR_RES_IOVA, iova)
	l.add("mrlen %d", mrlen)
	l.addU32(o, "pdn", uapi.RDMA_NLDEV_ATTR_RES_PDN)
	l.addOwner(pid, hasPID, name, named)
	return l.end(), true
}

// pdLine is a PD's line of "rdma resource show pd", or false when the
// filters leave it out; an entry without its use count is left out.
func pdLine(o netlink.ResObject, _ uint32, fs resFilters, comm commFunc) (string, bool) {
	users, ok := attrU64(o, uapi.RDMA_NLDEV_ATTR_RES_USECNT)
	if !ok {
		return "", false
	}
	lkey, _ := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY)
	rkey, _ := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_UNSAFE_GLOBAL_RKEY)
	pid, hasPID, name, named := owner(o, comm)
	ctxn, hasCtxn := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_CTXN)
	pdn, hasPDN := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_PDN)
	if fs.dropNum("users", users, true) || fs.dropNum("pid", uint64(pid), hasPID) ||
		fs.dropNum("ctxn", uint64(ctxn), hasCtxn) || fs.dropNum("pdn", uint64(pdn), hasPDN) {
		return "", false
	}
	var l resLine
	l.add("dev %s", o.Device)
	l.addU32(o, "pdn", uapi.RDMA_NLDEV_ATTR_RES_PDN)
	l.addKey(o, "local_dma_lkey", uapi.RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY, uint64(lkey))
	l.add("users %d", users)
	l.addKey(o, "unsafe_global_rkey", uapi.RDMA_NLDEV_ATTR_RES_UNSAFE_GLOBAL_RKEY, uint64(rkey))
	l.addU32(o, "ctxn", uapi.RDMA_NLDEV_ATTR_RES_CTXN)
	l.addOwner(pid, hasPID, name, named)
	return l.end(), true
}

// ctxLine is a device context's line of "rdma resource show ctx", or
// false when the filters leave it out; an entry without its number is
// left out.
func ctxLine(o netlink.ResObject, _ uint32, fs resFilters, comm commFunc) (string, bool) {
	ctxn, ok := attrU32(o, uapi.RDMA_NLDEV_ATTR_RES_CTXN)
	if !ok {
		return "", false
	}
	pid, hasPID, name, named := owner(o, comm)
	if fs.dropNum("pid", uint64(pid), hasPID) || fs.dropNum("ctxn", uint64(ctxn), true) {
		return "", false
	}
	var l resLine
	l.add("dev %s", o.Device)
	l.add("ctxn %d", ctxn)
	l.addOwner(pid, hasPID, name, named)
	return l.end(), true
}
