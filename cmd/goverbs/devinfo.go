package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// The devinfo subcommand prints what rdma-core's ibv_devinfo prints, in
// its layout (tabs included), so that the two outputs compare line by
// line. The layout follows ibv_devinfo of rdma-core 44 (Debian 12); the
// Linux half is devinfo_linux.go.

func init() { register("devinfo", "device and port details, like ibv_devinfo", devinfo) }

func devinfo(args []string) int { return devinfoTo(os.Stdout, os.Stderr, args) }

// devinfoOpts are the flags of devinfo, those of ibv_devinfo.
type devinfoOpts struct {
	dev     string // -d: only this device
	port    int    // -i: only this port; 0 for all
	list    bool   // -l: names only
	verbose bool   // -v
}

// parseDevinfo reads devinfo's flags. When ok is false the command ends
// with status: 2 for a usage error, 1 for a bad port, 0 after -h.
func parseDevinfo(stderr io.Writer, args []string) (o devinfoOpts, status int, ok bool) {
	fs := flag.NewFlagSet("devinfo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: goverbs devinfo [-d DEV] [-i PORT] [-l] [-v]")
		fmt.Fprintln(stderr, "  -d, -ib-dev DEV     only device DEV (default: all)")
		fmt.Fprintln(stderr, "  -i, -ib-port PORT   only port PORT, from 1 (default: all)")
		fmt.Fprintln(stderr, "  -l, -list           list the device names only")
		fmt.Fprintln(stderr, "  -v, -verbose        print every attribute, the GID tables included")
	}
	for _, n := range []string{"d", "ib-dev"} {
		fs.StringVar(&o.dev, n, "", "")
	}
	for _, n := range []string{"i", "ib-port"} {
		fs.IntVar(&o.port, n, 0, "")
	}
	for _, n := range []string{"l", "list"} {
		fs.BoolVar(&o.list, n, false, "")
	}
	for _, n := range []string{"v", "verbose"} {
		fs.BoolVar(&o.verbose, n, false, "")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, 0, false
		}
		return o, 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "goverbs devinfo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return o, 2, false
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if (set["i"] || set["ib-port"]) && (o.port < 1 || o.port > 255) {
		return o, failTo(stderr, "devinfo: port %d out of range [1, 255]", o.port), false
	}
	return o, 0, true
}

// nodeTransport returns the transport type libibverbs derives from a sysfs
// node_type ("1: CA"), as ibv_devinfo prints it: its name and its enum
// ibv_transport_type value.
func nodeTransport(nodeType string) (string, int) {
	n, _, _ := strings.Cut(nodeType, ":")
	switch v, _ := strconv.Atoi(strings.TrimSpace(n)); v {
	case 1, 2, 3: // CA, switch, router
		return "InfiniBand", 0
	case 4: // RNIC
		return "iWARP", 1
	case 5:
		return "usNIC", 2
	case 6:
		return "usNIC UDP", 3
	case 7:
		return "unspecified", 4
	}
	return "invalid transport", -1
}

// vlString names a port's max_vl_num (an encoded count of data VLs).
func vlString(v uint8) string {
	switch v {
	case 1:
		return "1"
	case 2:
		return "2"
	case 3:
		return "4"
	case 4:
		return "8"
	case 5:
		return "15"
	}
	return "invalid value"
}

// mtuString is an MTU as ibv_devinfo prints it: "4096", or "invalid MTU".
func mtuString(m uverbs.MTU) string {
	if m.Bytes() == 0 {
		return "invalid MTU"
	}
	return m.String()
}

// gidString is the GID of a table entry as ibv_devinfo prints it: IB and
// RoCE v1 GIDs as 16 hex bytes in pairs, RoCE v2 GIDs as IPv6 addresses
// (inet_ntop), followed on Ethernet ports by the type.
func gidString(e uverbs.GIDEntry, ethernet bool) string {
	var s string
	if e.Type == uverbs.GIDTypeRoCEv2 {
		s = e.GID.String()
	} else {
		b := make([]byte, 0, 39)
		for i := 0; i < len(e.GID); i += 2 {
			if i > 0 {
				b = append(b, ':')
			}
			b = fmt.Appendf(b, "%02x%02x", e.GID[i], e.GID[i+1])
		}
		s = string(b)
	}
	if !ethernet {
		return s
	}
	// ibv_devinfo reads the type as sysfs spells it, "IB/RoCE v1" or
	// "RoCE v2", and prints the first as RoCE v1 on Ethernet.
	if e.Type == uverbs.GIDTypeRoCEv2 {
		return s + ", RoCE v2"
	}
	return s + ", RoCE v1"
}

// bitName names one bit of a capability mask.
type bitName struct {
	bit  uint64
	name string
}

// Bits libibverbs defines that the kernel's uapi does not.
const (
	ibvDeviceInitType = 1 << 9 // IBV_DEVICE_INIT_TYPE

	// enum ibv_odp_general_caps and enum ibv_odp_transport_cap_bits
	ibvODPSupport         = 1 << 0
	ibvODPSupportImplicit = 1 << 1
	ibvODPSend            = 1 << 0
	ibvODPRecv            = 1 << 1
	ibvODPWrite           = 1 << 2
	ibvODPRead            = 1 << 3
	ibvODPAtomic          = 1 << 4
	ibvODPSRQRecv         = 1 << 5
	ibvODPFlush           = 1 << 6
	ibvODPAtomicWrite     = 1 << 7
)

// The names ibv_devinfo gives the bits of each mask, in its order.
var (
	deviceCapNames = []bitName{
		{uapi.IB_UVERBS_DEVICE_RESIZE_MAX_WR, "RESIZE_MAX_WR"},
		{uapi.IB_UVERBS_DEVICE_BAD_PKEY_CNTR, "BAD_PKEY_CNTR"},
		{uapi.IB_UVERBS_DEVICE_BAD_QKEY_CNTR, "BAD_QKEY_CNTR"},
		{uapi.IB_UVERBS_DEVICE_RAW_MULTI, "RAW_MULTI"},
		{uapi.IB_UVERBS_DEVICE_AUTO_PATH_MIG, "AUTO_PATH_MIG"},
		{uapi.IB_UVERBS_DEVICE_CHANGE_PHY_PORT, "CHANGE_PHY_PORT"},
		{uapi.IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE, "UD_AV_PORT_ENFORCE"},
		{uapi.IB_UVERBS_DEVICE_CURR_QP_STATE_MOD, "CURR_QP_STATE_MOD"},
		{uapi.IB_UVERBS_DEVICE_SHUTDOWN_PORT, "SHUTDOWN_PORT"},
		{ibvDeviceInitType, "INIT_TYPE"},
		{uapi.IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT, "PORT_ACTIVE_EVENT"},
		{uapi.IB_UVERBS_DEVICE_SYS_IMAGE_GUID, "SYS_IMAGE_GUID"},
		{uapi.IB_UVERBS_DEVICE_RC_RNR_NAK_GEN, "RC_RNR_NAK_GEN"},
		{uapi.IB_UVERBS_DEVICE_SRQ_RESIZE, "SRQ_RESIZE"},
		{uapi.IB_UVERBS_DEVICE_N_NOTIFY_CQ, "N_NOTIFY_CQ"},
		{uapi.IB_UVERBS_DEVICE_MEM_WINDOW, "MEM_WINDOW"},
		{uapi.IB_UVERBS_DEVICE_UD_IP_CSUM, "UD_IP_CSUM"},
		{uapi.IB_UVERBS_DEVICE_XRC, "XRC"},
		{uapi.IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS, "MEM_MGT_EXTENSIONS"},
		{uapi.IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A, "MEM_WINDOW_TYPE_2A"},
		{uapi.IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B, "MEM_WINDOW_TYPE_2B"},
		{uapi.IB_UVERBS_DEVICE_RC_IP_CSUM, "RC_IP_CSUM"},
		{uapi.IB_UVERBS_DEVICE_RAW_IP_CSUM, "RAW_IP_CSUM"},
		{uapi.IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING, "MANAGED_FLOW_STEERING"},
	}
	// deviceCapExNames are the bits above the low 32 of device_cap_flags_ex.
	deviceCapExNames = []bitName{
		{uapi.IB_UVERBS_DEVICE_RAW_SCATTER_FCS, "RAW_SCATTER_FCS"},
		{uapi.IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING, "PCI_WRITE_END_PADDING"},
	}
	odpGeneralNames = []bitName{
		{ibvODPSupport, "ODP_SUPPORT"},
		{ibvODPSupportImplicit, "ODP_SUPPORT_IMPLICIT"},
	}
	odpTransportNames = []bitName{
		{ibvODPSend, "SUPPORT_SEND"},
		{ibvODPRecv, "SUPPORT_RECV"},
		{ibvODPWrite, "SUPPORT_WRITE"},
		{ibvODPRead, "SUPPORT_READ"},
		{ibvODPAtomic, "SUPPORT_ATOMIC"},
		{ibvODPSRQRecv, "SUPPORT_SRQ"},
		{ibvODPFlush, "SUPPORT_FLUSH"},
		{ibvODPAtomicWrite, "SUPPORT_ATOMIC_WRITE"},
	}
	rawPacketCapNames = []bitName{
		{uapi.IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING, "C-VLAN stripping offload"},
		{uapi.IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS, "Scatter FCS offload"},
		{uapi.IB_UVERBS_RAW_PACKET_CAP_IP_CSUM, "IP csum offload"},
		{uapi.IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP, "Delay drop"},
	}
)

// bitNames lists the names of the bits set in v, then, if v has bits no
// name covers, "Unknown flags: 0x…"; withUnknown false leaves that out,
// as ibv_devinfo does for raw packet caps.
func bitNames(v uint64, names []bitName, withUnknown bool) []string {
	var out []string
	var known uint64
	for _, n := range names {
		known |= n.bit
		if v&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	if rest := v &^ known; rest != 0 && withUnknown {
		out = append(out, fmt.Sprintf("Unknown flags: 0x%X", rest))
	}
	return out
}

// fieldWriter writes ibv_devinfo's lines: indent tabs, "name:", tabs up to
// a value column (8-column tab stops, at least one tab), the value.
type fieldWriter struct {
	w   io.Writer
	err error
}

// The columns at which ibv_devinfo's values start.
const (
	devCol  = 40 // device attributes ("\tmax_qp:\t\t\t\t")
	portCol = 48 // port attributes ("\t\t\tstate:\t\t\t")
)

func (f *fieldWriter) printf(format string, args ...any) {
	if f.err == nil {
		_, f.err = fmt.Fprintf(f.w, format, args...)
	}
}

// field writes one "name: value" line.
func (f *fieldWriter) field(indent int, name string, col int, format string, args ...any) {
	pos := 8*indent + len(name) + 1
	tabs := 1
	for stop := (pos/8 + 1) * 8; stop < col; stop += 8 {
		tabs++
	}
	f.printf("%s%s:%s"+format+"\n", append([]any{strings.Repeat("\t", indent), name, strings.Repeat("\t", tabs)}, args...)...)
}

// flags writes the lines of a flag list, each five tabs in.
func (f *fieldWriter) flags(names []string) {
	for _, n := range names {
		f.printf("\t\t\t\t\t%s\n", n)
	}
}
