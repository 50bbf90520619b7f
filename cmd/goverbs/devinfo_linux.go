package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/goverbs/goverbs/uverbs"
)

// hca is what devinfo prints of one device, gathered before any of it is
// printed, so that a device that fails prints only its error line.
type hca struct {
	dev     uverbs.Device
	attr    uverbs.DeviceAttr
	boardID string // sysfs board_id, "" where the driver has none (rxe)
	vectors int    // completion vectors
	ports   []hcaPort
}

type hcaPort struct {
	num  int
	attr uverbs.PortAttr
	gids []uverbs.GIDEntry // with -v only
}

// devinfoTo runs devinfo with args, printing to stdout and its errors to
// stderr, and returns the exit status.
func devinfoTo(stdout, stderr io.Writer, args []string) int {
	o, status, ok := parseDevinfo(stderr, args)
	if !ok {
		return status
	}
	var devs []uverbs.Device
	if o.dev != "" && !o.list {
		d, err := uverbs.DeviceByName(o.dev)
		if err != nil {
			return failTo(stderr, "%v", err)
		}
		devs = []uverbs.Device{d}
	} else {
		var err error
		if devs, err = uverbs.Devices(); err != nil {
			return failTo(stderr, "%v", err)
		}
	}
	if o.list {
		plural := "s"
		if len(devs) == 1 {
			plural = ""
		}
		fmt.Fprintf(stdout, "%d HCA%s found:\n", len(devs), plural)
		for _, d := range devs {
			fmt.Fprintf(stdout, "\t%s\n", d.Name)
		}
		fmt.Fprintln(stdout)
		return 0
	}
	if len(devs) == 0 {
		return failTo(stderr, "no RDMA devices found")
	}
	status = 0
	for _, d := range devs {
		h, err := queryHCA(d, o.port, o.verbose)
		if err != nil {
			status = failTo(stderr, "%v", err)
			continue
		}
		if err := writeHCA(stdout, h, o.verbose); err != nil {
			return failTo(stderr, "devinfo: %v", err)
		}
	}
	return status
}

// queryHCA opens d and reads its attributes, those of port (or of every
// port if port is 0) and, if verbose, their GID tables.
func queryHCA(d uverbs.Device, port int, verbose bool) (*hca, error) {
	ctx, err := d.Open()
	if err != nil {
		return nil, err
	}
	defer ctx.Close()
	h := &hca{dev: d, vectors: ctx.NumCompVectors()}
	if h.attr, err = ctx.QueryDevice(); err != nil {
		return nil, err
	}
	if port > h.attr.PhysPortCnt {
		return nil, fmt.Errorf("devinfo %s: no port %d: the device has %d", d.Name, port, h.attr.PhysPortCnt)
	}
	// ibv_devinfo prints board_id when sysfs has it (mlx5 does, rxe not).
	if b, err := os.ReadFile(filepath.Join("/sys/class/infiniband", d.Name, "board_id")); err == nil {
		h.boardID = strings.TrimRight(string(b), "\n")
	}
	for p := 1; p <= h.attr.PhysPortCnt; p++ {
		if port != 0 && p != port {
			continue
		}
		hp := hcaPort{num: p}
		if hp.attr, err = ctx.QueryPort(p); err != nil {
			return nil, err
		}
		if verbose {
			if hp.gids, err = ctx.GIDTable(p); err != nil {
				return nil, err
			}
		}
		h.ports = append(h.ports, hp)
	}
	return h, nil
}

// writeHCA prints h as ibv_devinfo (-v, if verbose) prints a device.
//
// Of what ibv_devinfo -v prints, uverbs.DeviceAttr does not hold
// max_ee_rd_atom, max_ee_init_rd_atom, max_ee, max_rdd, max_fmr (which
// kernels no longer fill), tso_caps, rss_caps, packet_pacing_caps and the
// tag-matching caps: those lines are left out, not made up.
func writeHCA(w io.Writer, h *hca, verbose bool) error {
	f := &fieldWriter{w: w}
	a := &h.attr
	tname, tnum := nodeTransport(h.dev.NodeType)
	f.field(0, "hca_id", 8, "%s", h.dev.Name)
	f.field(1, "transport", devCol, "%s (%d)", tname, tnum)
	if a.FWVersion != "" {
		f.field(1, "fw_ver", devCol, "%s", a.FWVersion)
	}
	f.field(1, "node_guid", devCol, "%s", a.NodeGUID)
	f.field(1, "sys_image_guid", devCol, "%s", a.SysImageGUID)
	f.field(1, "vendor_id", devCol, "0x%04x", a.VendorID)
	f.field(1, "vendor_part_id", devCol, "%d", a.VendorPartID)
	f.field(1, "hw_ver", devCol, "0x%X", a.HWVer)
	if h.boardID != "" {
		f.field(1, "board_id", devCol, "%s", h.boardID)
	}
	f.field(1, "phys_port_cnt", devCol, "%d", a.PhysPortCnt)
	if verbose {
		writeDeviceLimits(f, h)
	}
	for _, p := range h.ports {
		writePort(f, h, &p, verbose)
	}
	return f.err
}

// writeDeviceLimits prints the device attributes of ibv_devinfo -v.
func writeDeviceLimits(f *fieldWriter, h *hca) {
	a := &h.attr
	f.field(1, "max_mr_size", devCol, "0x%x", a.MaxMRSize)
	f.field(1, "page_size_cap", devCol, "0x%x", a.PageSizeCap)
	f.field(1, "max_qp", devCol, "%d", a.MaxQP)
	f.field(1, "max_qp_wr", devCol, "%d", a.MaxQPWR)
	f.field(1, "device_cap_flags", devCol, "0x%08x", uint64(a.DeviceCapFlags))
	f.flags(bitNames(uint64(a.DeviceCapFlags), deviceCapNames, true))
	f.field(1, "max_sge", devCol, "%d", a.MaxSGE)
	f.field(1, "max_sge_rd", devCol, "%d", a.MaxSGERd)
	f.field(1, "max_cq", devCol, "%d", a.MaxCQ)
	f.field(1, "max_cqe", devCol, "%d", a.MaxCQE)
	f.field(1, "max_mr", devCol, "%d", a.MaxMR)
	f.field(1, "max_pd", devCol, "%d", a.MaxPD)
	f.field(1, "max_qp_rd_atom", devCol, "%d", a.MaxQPRdAtom)
	f.field(1, "max_res_rd_atom", devCol, "%d", a.MaxResRdAtom)
	f.field(1, "max_qp_init_rd_atom", devCol, "%d", a.MaxQPInitRdAtom)
	f.field(1, "atomic_cap", devCol, "%s (%d)", atomicCapString(a.AtomicCap), a.AtomicCap)
	f.field(1, "max_mw", devCol, "%d", a.MaxMW)
	f.field(1, "max_raw_ipv6_qp", devCol, "%d", a.MaxRawIPv6QP)
	f.field(1, "max_raw_ethy_qp", devCol, "%d", a.MaxRawEthernetQP)
	f.field(1, "max_mcast_grp", devCol, "%d", a.MaxMcastGrp)
	f.field(1, "max_mcast_qp_attach", devCol, "%d", a.MaxMcastQPAttach)
	f.field(1, "max_total_mcast_qp_attach", devCol, "%d", a.MaxTotalMcastQPAttach)
	f.field(1, "max_ah", devCol, "%d", a.MaxAH)
	f.field(1, "max_srq", devCol, "%d", a.MaxSRQ)
	if a.MaxSRQ != 0 {
		f.field(1, "max_srq_wr", devCol, "%d", a.MaxSRQWR)
		f.field(1, "max_srq_sge", devCol, "%d", a.MaxSRQSGE)
	}
	f.field(1, "max_pkeys", devCol, "%d", a.MaxPkeys)
	f.field(1, "local_ca_ack_delay", devCol, "%d", a.LocalCAAckDelay)

	f.printf("\tgeneral_odp_caps:\n")
	f.flags(bitNames(a.ODPCaps.GeneralCaps, odpGeneralNames, true))
	for _, t := range []struct {
		name string
		caps uint32
	}{{"rc", a.ODPCaps.RC}, {"uc", a.ODPCaps.UC}, {"ud", a.ODPCaps.UD}, {"xrc", a.ODPCaps.XRC}} {
		f.printf("\t%s_odp_caps:\n", t.name)
		if t.caps == 0 {
			f.flags([]string{"NO SUPPORT"})
		} else {
			f.flags(bitNames(uint64(t.caps), odpTransportNames, true))
		}
	}
	if a.CompletionTimestampMask != 0 {
		// sic: a space, not an underscore, and three tabs
		f.printf("\tcompletion timestamp_mask:\t\t\t0x%016x\n", a.CompletionTimestampMask)
	} else {
		f.printf("\tcompletion_timestamp_mask not supported\n")
	}
	if a.HCACoreClock != 0 {
		f.field(1, "hca_core_clock", devCol, "%dkHZ", a.HCACoreClock)
	} else {
		f.printf("\tcore clock not supported\n")
	}
	if a.RawPacketCapFlags != 0 {
		f.printf("\traw packet caps:\n")
		f.flags(bitNames(uint64(a.RawPacketCapFlags), rawPacketCapNames, false))
	}
	f.field(1, "device_cap_flags_ex", devCol, "0x%X", uint64(a.DeviceCapFlagsEx))
	f.flags(bitNames(uint64(a.DeviceCapFlagsEx)&^0xffffffff, deviceCapExNames, true))
	f.field(1, "max_wq_type_rq", devCol, "%d", a.MaxWQTypeRQ)
	if m := a.CQModeration; m.MaxCount != 0 && m.MaxPeriod != 0 {
		f.printf("\n\tcq moderation caps:\n")
		f.field(2, "max_cq_count", 0, "%d", m.MaxCount)
		f.field(2, "max_cq_period", 0, "%d us\n", m.MaxPeriod)
	}
	if a.MaxDMSize != 0 {
		f.field(1, "maximum available device memory", devCol, "%dBytes\n", a.MaxDMSize)
	}
	f.field(1, "num_comp_vectors", devCol, "%d", h.vectors)
}

// writePort prints one port, then the empty line ibv_devinfo ends it with.
func writePort(f *fieldWriter, h *hca, p *hcaPort, verbose bool) {
	a := &p.attr
	f.field(2, "port", 24, "%d", p.num)
	f.field(3, "state", portCol, "%s (%d)", portStateString(a.State), a.State)
	f.field(3, "max_mtu", portCol, "%s (%d)", mtuString(a.MaxMTU), a.MaxMTU)
	f.field(3, "active_mtu", portCol, "%s (%d)", mtuString(a.ActiveMTU), a.ActiveMTU)
	f.field(3, "sm_lid", portCol, "%d", a.SMLID)
	f.field(3, "port_lid", portCol, "%d", a.LID)
	f.field(3, "port_lmc", portCol, "0x%02x", a.LMC)
	f.field(3, "link_layer", portCol, "%s", linkLayerString(a.LinkLayer))
	if verbose {
		f.field(3, "max_msg_sz", portCol, "0x%x", a.MaxMsgSz)
		f.field(3, "port_cap_flags", portCol, "0x%08x", uint32(a.PortCapFlags))
		f.field(3, "port_cap_flags2", portCol, "0x%04x", a.PortCapFlags2)
		f.field(3, "max_vl_num", portCol, "%s (%d)", vlString(a.MaxVLNum), a.MaxVLNum)
		f.field(3, "bad_pkey_cntr", portCol, "0x%x", a.BadPkeyCntr)
		f.field(3, "qkey_viol_cntr", portCol, "0x%x", a.QkeyViolCntr)
		f.field(3, "sm_sl", portCol, "%d", a.SMSL)
		f.field(3, "pkey_tbl_len", portCol, "%d", a.PkeyTblLen)
		f.field(3, "gid_tbl_len", portCol, "%d", a.GIDTblLen)
		f.field(3, "subnet_timeout", portCol, "%d", a.SubnetTimeout)
		f.field(3, "init_type_reply", portCol, "%d", a.InitTypeReply)
		f.field(3, "active_width", portCol, "%s (%d)", widthString(a.ActiveWidth), a.ActiveWidth)
		f.field(3, "active_speed", portCol, "%s (%d)", speedString(a.ActiveSpeed), a.ActiveSpeed)
		if _, t := nodeTransport(h.dev.NodeType); t == 0 { // InfiniBand transport, RoCE included
			f.field(3, "phys_state", portCol, "%s (%d)", physStateString(a.PhysState), a.PhysState)
		}
		for _, g := range p.gids {
			f.field(3, fmt.Sprintf("GID[%3d]", g.Index), portCol, "%s", gidString(g, a.LinkLayer == uverbs.LinkLayerEthernet))
		}
	}
	f.printf("\n")
}

// The names ibv_devinfo prints, where it has one; uverbs names the values
// it does not ("PORT_NOP") that ibv_devinfo calls invalid.

func portStateString(s uverbs.PortState) string {
	if s < uverbs.PortDown || s > uverbs.PortActive {
		return "invalid state"
	}
	return s.String()
}

func physStateString(s uverbs.PhysState) string {
	if s < uverbs.PhysSleep || s > uverbs.PhysTest {
		return "invalid physical state"
	}
	return s.String()
}

func atomicCapString(a uverbs.AtomicCap) string {
	if a > uverbs.AtomicGlob {
		return "invalid atomic capability"
	}
	return a.String()
}

func linkLayerString(l uverbs.LinkLayer) string {
	if l > uverbs.LinkLayerEthernet {
		return "Unknown"
	}
	return l.String()
}

func widthString(w uverbs.Width) string {
	if w.Lanes() == 0 {
		return "invalid width" // ibv_devinfo's "%sX" makes it "invalid widthX"
	}
	return w.String()
}

func speedString(s uverbs.Speed) string {
	if s.Gbps() == 0 {
		return "invalid speed"
	}
	return s.String()
}
