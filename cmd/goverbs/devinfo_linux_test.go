package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uverbs"
)

// notOurs are the fields of ibv_devinfo -v whose values uverbs.DeviceAttr
// does not hold, so goverbs devinfo leaves them out (keys as
// parseDevinfoOutput makes them, without the "hca: " prefix).
var notOurs = map[string]bool{
	"max_ee_rd_atom": true, "max_ee_init_rd_atom": true, "max_ee": true, "max_rdd": true,
	"max_fmr": true, "max_map_per_fmr": true,
	"tso_caps": true, "tso_caps/max_tso": true, "tso_caps/supported_qp": true,
	"rss_caps": true, "rss_caps/max_rwq_indirection_tables": true, "rss_caps/max_rwq_indirection_table_size": true,
	"rss_caps/rx_hash_function": true, "rss_caps/rx_hash_fields_mask": true, "rss_caps/supported_qp": true,
	"packet_pacing_caps": true, "packet_pacing_caps/qp_rate_limit_min": true,
	"packet_pacing_caps/qp_rate_limit_max": true, "packet_pacing_caps/supported_qp": true,
	"tag matching not supported": true,
}

// devinfoField is one field of ibv_devinfo's output: its key, made
// unique by its device and section ("rxe0: port 1/state",
// "rxe0: tso_caps/max_tso"); its value, with the flag lines under it
// joined by "|"; and its text, those lines and any empty line after.
type devinfoField struct{ key, value, text string }

// bare is the key without its "hca: " prefix.
func (f devinfoField) bare() string {
	if _, k, ok := strings.Cut(f.key, ": "); ok {
		return k
	}
	return f.key
}

func parseDevinfoOutput(s string) []devinfoField {
	var out []devinfoField
	var hca, section, port string
	for _, line := range strings.SplitAfter(s, "\n") {
		if line == "" {
			continue
		}
		text := strings.TrimLeft(strings.TrimSuffix(line, "\n"), "\t")
		indent := len(line) - len(text) - 1
		if (text == "" || indent >= 4) && len(out) > 0 { // an empty line, or a flag of the field above
			f := &out[len(out)-1]
			f.text += line
			if text != "" {
				if f.value != "" {
					f.value += "|"
				}
				f.value += text
			}
			continue
		}
		key, value, _ := strings.Cut(text, ":")
		value = strings.TrimSpace(value)
		switch {
		case indent == 0:
			hca, section, port = value, "", ""
		case indent == 1:
			section, port = "", ""
			if value == "" {
				section = key
			}
		case indent == 2 && key == "port":
			port, section = value, ""
		case indent == 2 && section != "":
			key = section + "/" + key
		case indent == 3 && port != "":
			key = "port " + port + "/" + key
		}
		if indent > 0 {
			key = hca + ": " + key
		}
		out = append(out, devinfoField{key, value, line})
	}
	return out
}

// compareDevinfo checks goverbs devinfo's output against ibv_devinfo's:
// each field both print must have one value, each field must be printed
// by both (notOurs aside), and with the notOurs lines taken out of
// ibv_devinfo's output, the two must be the same bytes.
func compareDevinfo(t *testing.T, theirs, ours []devinfoField) {
	t.Helper()
	index := func(fs []devinfoField) map[string]string {
		m := map[string]string{}
		for _, f := range fs {
			if _, dup := m[f.key]; dup {
				t.Errorf("field %q printed twice", f.key)
			}
			m[f.key] = f.value
		}
		return m
	}
	tm, om := index(theirs), index(ours)
	var want, got strings.Builder
	for _, f := range theirs {
		v, ok := om[f.key]
		switch {
		case !ok && notOurs[f.bare()]:
			t.Logf("left out (not in uverbs.DeviceAttr): %s = %q", f.key, f.value)
			continue
		case !ok:
			t.Errorf("ibv_devinfo prints %s = %q; goverbs devinfo does not", f.key, f.value)
		case v != f.value:
			t.Errorf("%s: ibv_devinfo %q, goverbs devinfo %q", f.key, f.value, v)
		}
		want.WriteString(f.text)
	}
	for _, f := range ours {
		if _, ok := tm[f.key]; !ok {
			t.Errorf("goverbs devinfo prints %s = %q; ibv_devinfo does not", f.key, f.value)
		}
		got.WriteString(f.text)
	}
	if diff := cmp.Diff(want.String(), got.String()); diff != "" {
		t.Errorf("ibv_devinfo's output without the fields left out, against goverbs devinfo's (-ibv_devinfo +goverbs):\n%s", diff)
	}
}

func TestParseDevinfoOutput(t *testing.T) {
	in := "hca_id:\trxe0\n\tfw_ver:\t\t\t\t0.0.0\n\tdevice_cap_flags:\t\t0x00213c76\n\t\t\t\t\tBAD_PKEY_CNTR\n\t\t\t\t\tXRC\n" +
		"\ttso_caps:\n\t\tmax_tso:\t\t\t0\n\tcore clock not supported\n\t\tport:\t1\n\t\t\tGID[  0]:\t\tfe80::1, RoCE v2\n\n"
	want := []devinfoField{
		{"hca_id", "rxe0", "hca_id:\trxe0\n"},
		{"rxe0: fw_ver", "0.0.0", "\tfw_ver:\t\t\t\t0.0.0\n"},
		{"rxe0: device_cap_flags", "0x00213c76|BAD_PKEY_CNTR|XRC", "\tdevice_cap_flags:\t\t0x00213c76\n\t\t\t\t\tBAD_PKEY_CNTR\n\t\t\t\t\tXRC\n"},
		{"rxe0: tso_caps", "", "\ttso_caps:\n"},
		{"rxe0: tso_caps/max_tso", "0", "\t\tmax_tso:\t\t\t0\n"},
		{"rxe0: core clock not supported", "", "\tcore clock not supported\n"},
		{"rxe0: port", "1", "\t\tport:\t1\n"},
		{"rxe0: port 1/GID[  0]", "fe80::1, RoCE v2", "\t\t\tGID[  0]:\t\tfe80::1, RoCE v2\n\n"},
	}
	got := parseDevinfoOutput(in)
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(devinfoField{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	var text strings.Builder
	for _, f := range got {
		text.WriteString(f.text)
	}
	if text.String() != in {
		t.Errorf("the fields' text is %q, not the input", text.String())
	}
}

// ibvDevinfoRxe0 is what rdma-core 44's ibv_devinfo -d rxe0 -v printed on
// Linux 6.1 (amd64, rxe0 over the dummy d0 with 192.0.2.1/24).
const ibvDevinfoRxe0 = `hca_id:	rxe0
	transport:			InfiniBand (0)
	fw_ver:				0.0.0
	node_guid:			78f2:3eff:fef2:cd3c
	sys_image_guid:			78f2:3eff:fef2:cd3c
	vendor_id:			0xffffff
	vendor_part_id:			0
	hw_ver:				0x0
	phys_port_cnt:			1
	max_mr_size:			0xffffffffffffffff
	page_size_cap:			0xfffff000
	max_qp:				1048560
	max_qp_wr:			1048576
	device_cap_flags:		0x01223c76
					BAD_PKEY_CNTR
					BAD_QKEY_CNTR
					AUTO_PATH_MIG
					CHANGE_PHY_PORT
					UD_AV_PORT_ENFORCE
					PORT_ACTIVE_EVENT
					SYS_IMAGE_GUID
					RC_RNR_NAK_GEN
					SRQ_RESIZE
					MEM_WINDOW
					MEM_MGT_EXTENSIONS
					MEM_WINDOW_TYPE_2B
	max_sge:			32
	max_sge_rd:			32
	max_cq:				1048576
	max_cqe:			32767
	max_mr:				524287
	max_pd:				1048576
	max_qp_rd_atom:			128
	max_ee_rd_atom:			0
	max_res_rd_atom:		258048
	max_qp_init_rd_atom:		128
	max_ee_init_rd_atom:		0
	atomic_cap:			ATOMIC_HCA (1)
	max_ee:				0
	max_rdd:			0
	max_mw:				524287
	max_raw_ipv6_qp:		0
	max_raw_ethy_qp:		0
	max_mcast_grp:			8192
	max_mcast_qp_attach:		56
	max_total_mcast_qp_attach:	458752
	max_ah:				32767
	max_fmr:			0
	max_srq:			917503
	max_srq_wr:			1048576
	max_srq_sge:			27
	max_pkeys:			64
	local_ca_ack_delay:		15
	general_odp_caps:
	rc_odp_caps:
					NO SUPPORT
	uc_odp_caps:
					NO SUPPORT
	ud_odp_caps:
					NO SUPPORT
	xrc_odp_caps:
					NO SUPPORT
	completion_timestamp_mask not supported
	core clock not supported
	device_cap_flags_ex:		0x1223C76
	tso_caps:
		max_tso:			0
	rss_caps:
		max_rwq_indirection_tables:			0
		max_rwq_indirection_table_size:			0
		rx_hash_function:				0x0
		rx_hash_fields_mask:				0x0
	max_wq_type_rq:			0
	packet_pacing_caps:
		qp_rate_limit_min:	0kbps
		qp_rate_limit_max:	0kbps
	tag matching not supported
	num_comp_vectors:		2
		port:	1
			state:			PORT_ACTIVE (4)
			max_mtu:		4096 (5)
			active_mtu:		1024 (3)
			sm_lid:			0
			port_lid:		0
			port_lmc:		0x00
			link_layer:		Ethernet
			max_msg_sz:		0x800000
			port_cap_flags:		0x00010000
			port_cap_flags2:	0x0000
			max_vl_num:		1 (1)
			bad_pkey_cntr:		0x0
			qkey_viol_cntr:		0x0
			sm_sl:			0
			pkey_tbl_len:		1
			gid_tbl_len:		1024
			subnet_timeout:		0
			init_type_reply:	0
			active_width:		1X (1)
			active_speed:		2.5 Gbps (1)
			phys_state:		LINK_UP (5)
			GID[  0]:		fe80::78f2:3eff:fef2:cd3c, RoCE v2
			GID[  1]:		::ffff:192.0.2.1, RoCE v2

`

// rxe0 holds the values behind ibvDevinfoRxe0, as uverbs reports them.
func rxe0() *hca {
	h := &hca{
		dev:     uverbs.Device{Name: "rxe0", NodeType: "1: CA", NodeGUID: 0x78f23efffef2cd3c, SysImageGUID: 0x78f23efffef2cd3c},
		vectors: 2,
	}
	a := &h.attr
	a.FWVersion, a.NodeGUID, a.SysImageGUID = "0.0.0", h.dev.NodeGUID, h.dev.SysImageGUID
	a.VendorID, a.PhysPortCnt = 0xffffff, 1
	a.MaxMRSize, a.PageSizeCap = 0xffffffffffffffff, 0xfffff000
	a.MaxQP, a.MaxQPWR, a.DeviceCapFlags, a.DeviceCapFlagsEx = 1048560, 1048576, 0x01223c76, 0x1223c76
	a.MaxSGE, a.MaxSGERd, a.MaxCQ, a.MaxCQE, a.MaxMR, a.MaxPD = 32, 32, 1048576, 32767, 524287, 1048576
	a.MaxQPRdAtom, a.MaxResRdAtom, a.MaxQPInitRdAtom, a.AtomicCap = 128, 258048, 128, uverbs.AtomicHCA
	a.MaxMW, a.MaxMcastGrp, a.MaxMcastQPAttach, a.MaxTotalMcastQPAttach, a.MaxAH = 524287, 8192, 56, 458752, 32767
	a.MaxSRQ, a.MaxSRQWR, a.MaxSRQSGE, a.MaxPkeys, a.LocalCAAckDelay = 917503, 1048576, 27, 64, 15
	gid := func(s string) uverbs.GID {
		g, err := uverbs.ParseGID(s)
		if err != nil {
			panic(err)
		}
		return g
	}
	h.ports = []hcaPort{{num: 1, attr: uverbs.PortAttr{
		State: uverbs.PortActive, MaxMTU: uverbs.MTU4096, ActiveMTU: uverbs.MTU1024, LinkLayer: uverbs.LinkLayerEthernet,
		MaxMsgSz: 0x800000, PortCapFlags: 0x00010000, MaxVLNum: 1, PkeyTblLen: 1, GIDTblLen: 1024,
		ActiveWidth: uverbs.Width1X, ActiveSpeed: uverbs.SpeedSDR, PhysState: uverbs.PhysLinkUp,
	}, gids: []uverbs.GIDEntry{
		{Index: 0, Port: 1, Type: uverbs.GIDTypeRoCEv2, GID: gid("fe80::78f2:3eff:fef2:cd3c"), Netdev: "d0"},
		{Index: 1, Port: 1, Type: uverbs.GIDTypeRoCEv2, GID: gid("::ffff:192.0.2.1"), Netdev: "d0"},
	}}}
	return h
}

// TestWriteHCARxe0 prints rxe0 from the values ibv_devinfo printed and
// compares the two outputs.
func TestWriteHCARxe0(t *testing.T) {
	var b strings.Builder
	if err := writeHCA(&b, rxe0(), true); err != nil {
		t.Fatal(err)
	}
	compareDevinfo(t, parseDevinfoOutput(ibvDevinfoRxe0), parseDevinfoOutput(b.String()))
	// Without -v, as the VM harness's smoke step shows it.
	b.Reset()
	if err := writeHCA(&b, rxe0(), false); err != nil {
		t.Fatal(err)
	}
	compareDevinfo(t, parseDevinfoOutput(ibvDevinfoRxe0Short), parseDevinfoOutput(b.String()))
}

// ibvDevinfoRxe0Short is ibv_devinfo -d rxe0, as ibvDevinfoRxe0.
const ibvDevinfoRxe0Short = "hca_id:\trxe0\n" +
	"\ttransport:\t\t\tInfiniBand (0)\n" +
	"\tfw_ver:\t\t\t\t0.0.0\n" +
	"\tnode_guid:\t\t\t78f2:3eff:fef2:cd3c\n" +
	"\tsys_image_guid:\t\t\t78f2:3eff:fef2:cd3c\n" +
	"\tvendor_id:\t\t\t0xffffff\n" +
	"\tvendor_part_id:\t\t\t0\n" +
	"\thw_ver:\t\t\t\t0x0\n" +
	"\tphys_port_cnt:\t\t\t1\n" +
	"\t\tport:\t1\n" +
	"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n" +
	"\t\t\tmax_mtu:\t\t4096 (5)\n" +
	"\t\t\tactive_mtu:\t\t1024 (3)\n" +
	"\t\t\tsm_lid:\t\t\t0\n" +
	"\t\t\tport_lid:\t\t0\n" +
	"\t\t\tport_lmc:\t\t0x00\n" +
	"\t\t\tlink_layer:\t\tEthernet\n" +
	"\n"

// TestWriteHCABranches prints what rxe never shows: an InfiniBand port, a
// board id, flags without names, timestamps, raw packet and moderation
// caps, device memory, and values ibv_devinfo calls invalid. The expected
// text follows the format strings of ibv_devinfo (rdma-core 44).
func TestWriteHCABranches(t *testing.T) {
	gid, _ := uverbs.ParseGID("fe80::c42:a103:65:9b44")
	h := &hca{
		dev:     uverbs.Device{Name: "mlx5_0", NodeType: "1: CA"},
		boardID: "MT_0000000008",
		vectors: 8,
		ports: []hcaPort{{num: 1, attr: uverbs.PortAttr{
			State: uverbs.PortDown, MaxMTU: uverbs.MTU4096, ActiveMTU: uverbs.MTU4096, SMLID: 1, LID: 7,
			LinkLayer: uverbs.LinkLayerInfiniBand, MaxMsgSz: 0x40000000, PortCapFlags: 0x2651e848, PortCapFlags2: 0x32,
			MaxVLNum: 3, PkeyTblLen: 128, GIDTblLen: 8, SubnetTimeout: 18,
			ActiveWidth: uverbs.Width4X, ActiveSpeed: uverbs.SpeedEDR, PhysState: uverbs.PhysLinkUp,
		}, gids: []uverbs.GIDEntry{{Index: 0, Port: 1, Type: uverbs.GIDTypeIB, GID: gid}}}},
	}
	a := &h.attr
	a.FWVersion, a.NodeGUID, a.SysImageGUID = "16.35.2000", 0x0c42a10300659b44, 0x0c42a10300659b44
	a.VendorID, a.VendorPartID, a.PhysPortCnt = 0x02c9, 4119, 1
	a.MaxMRSize, a.PageSizeCap = 0xffffffffffffffff, 0xfffffffffffff000
	a.MaxQP, a.MaxQPWR, a.DeviceCapFlags, a.DeviceCapFlagsEx = 131072, 32768, 0x80000201, 0x1480000201
	a.MaxSGE, a.MaxSGERd, a.MaxCQ, a.MaxCQE, a.MaxMR, a.MaxPD = 30, 30, 16777216, 4194303, 16777216, 8388608
	a.MaxQPRdAtom, a.MaxResRdAtom, a.MaxQPInitRdAtom, a.AtomicCap = 16, 2097152, 16, uverbs.AtomicHCA
	a.MaxMW, a.MaxMcastGrp, a.MaxMcastQPAttach, a.MaxTotalMcastQPAttach, a.MaxAH = 16777216, 2097152, 240, 503316480, 2147483647
	a.MaxPkeys, a.LocalCAAckDelay = 128, 16
	a.ODPCaps = uverbs.ODPCaps{GeneralCaps: 3, RC: 0x3f, UD: 1}
	a.CompletionTimestampMask, a.HCACoreClock, a.RawPacketCapFlags = 0x7fffffffffffffff, 156250, 5
	a.MaxWQTypeRQ, a.MaxDMSize = 8388608, 131072
	a.CQModeration.MaxCount, a.CQModeration.MaxPeriod = 65535, 4095

	const want = "hca_id:\tmlx5_0\n" +
		"\ttransport:\t\t\tInfiniBand (0)\n" +
		"\tfw_ver:\t\t\t\t16.35.2000\n" +
		"\tnode_guid:\t\t\t0c42:a103:0065:9b44\n" +
		"\tsys_image_guid:\t\t\t0c42:a103:0065:9b44\n" +
		"\tvendor_id:\t\t\t0x02c9\n" +
		"\tvendor_part_id:\t\t\t4119\n" +
		"\thw_ver:\t\t\t\t0x0\n" +
		"\tboard_id:\t\t\tMT_0000000008\n" +
		"\tphys_port_cnt:\t\t\t1\n" +
		"\tmax_mr_size:\t\t\t0xffffffffffffffff\n" +
		"\tpage_size_cap:\t\t\t0xfffffffffffff000\n" +
		"\tmax_qp:\t\t\t\t131072\n" +
		"\tmax_qp_wr:\t\t\t32768\n" +
		"\tdevice_cap_flags:\t\t0x80000201\n" +
		"\t\t\t\t\tRESIZE_MAX_WR\n" +
		"\t\t\t\t\tINIT_TYPE\n" +
		"\t\t\t\t\tUnknown flags: 0x80000000\n" +
		"\tmax_sge:\t\t\t30\n" +
		"\tmax_sge_rd:\t\t\t30\n" +
		"\tmax_cq:\t\t\t\t16777216\n" +
		"\tmax_cqe:\t\t\t4194303\n" +
		"\tmax_mr:\t\t\t\t16777216\n" +
		"\tmax_pd:\t\t\t\t8388608\n" +
		"\tmax_qp_rd_atom:\t\t\t16\n" +
		"\tmax_res_rd_atom:\t\t2097152\n" +
		"\tmax_qp_init_rd_atom:\t\t16\n" +
		"\tatomic_cap:\t\t\tATOMIC_HCA (1)\n" +
		"\tmax_mw:\t\t\t\t16777216\n" +
		"\tmax_raw_ipv6_qp:\t\t0\n" +
		"\tmax_raw_ethy_qp:\t\t0\n" +
		"\tmax_mcast_grp:\t\t\t2097152\n" +
		"\tmax_mcast_qp_attach:\t\t240\n" +
		"\tmax_total_mcast_qp_attach:\t503316480\n" +
		"\tmax_ah:\t\t\t\t2147483647\n" +
		"\tmax_srq:\t\t\t0\n" +
		"\tmax_pkeys:\t\t\t128\n" +
		"\tlocal_ca_ack_delay:\t\t16\n" +
		"\tgeneral_odp_caps:\n" +
		"\t\t\t\t\tODP_SUPPORT\n" +
		"\t\t\t\t\tODP_SUPPORT_IMPLICIT\n" +
		"\trc_odp_caps:\n" +
		"\t\t\t\t\tSUPPORT_SEND\n" +
		"\t\t\t\t\tSUPPORT_RECV\n" +
		"\t\t\t\t\tSUPPORT_WRITE\n" +
		"\t\t\t\t\tSUPPORT_READ\n" +
		"\t\t\t\t\tSUPPORT_ATOMIC\n" +
		"\t\t\t\t\tSUPPORT_SRQ\n" +
		"\tuc_odp_caps:\n" +
		"\t\t\t\t\tNO SUPPORT\n" +
		"\tud_odp_caps:\n" +
		"\t\t\t\t\tSUPPORT_SEND\n" +
		"\txrc_odp_caps:\n" +
		"\t\t\t\t\tNO SUPPORT\n" +
		"\tcompletion timestamp_mask:\t\t\t0x7fffffffffffffff\n" +
		"\thca_core_clock:\t\t\t156250kHZ\n" +
		"\traw packet caps:\n" +
		"\t\t\t\t\tC-VLAN stripping offload\n" +
		"\t\t\t\t\tIP csum offload\n" +
		"\tdevice_cap_flags_ex:\t\t0x1480000201\n" +
		"\t\t\t\t\tRAW_SCATTER_FCS\n" +
		"\t\t\t\t\tPCI_WRITE_END_PADDING\n" +
		"\tmax_wq_type_rq:\t\t\t8388608\n" +
		"\n\tcq moderation caps:\n" +
		"\t\tmax_cq_count:\t65535\n" +
		"\t\tmax_cq_period:\t4095 us\n\n" +
		"\tmaximum available device memory:\t131072Bytes\n\n" +
		"\tnum_comp_vectors:\t\t8\n" +
		"\t\tport:\t1\n" +
		"\t\t\tstate:\t\t\tPORT_DOWN (1)\n" +
		"\t\t\tmax_mtu:\t\t4096 (5)\n" +
		"\t\t\tactive_mtu:\t\t4096 (5)\n" +
		"\t\t\tsm_lid:\t\t\t1\n" +
		"\t\t\tport_lid:\t\t7\n" +
		"\t\t\tport_lmc:\t\t0x00\n" +
		"\t\t\tlink_layer:\t\tInfiniBand\n" +
		"\t\t\tmax_msg_sz:\t\t0x40000000\n" +
		"\t\t\tport_cap_flags:\t\t0x2651e848\n" +
		"\t\t\tport_cap_flags2:\t0x0032\n" +
		"\t\t\tmax_vl_num:\t\t4 (3)\n" +
		"\t\t\tbad_pkey_cntr:\t\t0x0\n" +
		"\t\t\tqkey_viol_cntr:\t\t0x0\n" +
		"\t\t\tsm_sl:\t\t\t0\n" +
		"\t\t\tpkey_tbl_len:\t\t128\n" +
		"\t\t\tgid_tbl_len:\t\t8\n" +
		"\t\t\tsubnet_timeout:\t\t18\n" +
		"\t\t\tinit_type_reply:\t0\n" +
		"\t\t\tactive_width:\t\t4X (2)\n" +
		"\t\t\tactive_speed:\t\t25.0 Gbps (32)\n" +
		"\t\t\tphys_state:\t\tLINK_UP (5)\n" +
		"\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0c42:a103:0065:9b44\n" +
		"\n"
	var b strings.Builder
	if err := writeHCA(&b, h, true); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// Values ibv_devinfo has no name for, and an iWARP device, which has
	// no fw_ver and prints no phys_state.
	h.dev.NodeType, h.attr.FWVersion = "4: RNIC", ""
	h.ports[0].attr = uverbs.PortAttr{LinkLayer: 7, MaxVLNum: 9, ActiveWidth: 3, ActiveSpeed: 3, PhysState: 9}
	h.ports[0].gids = nil
	h.attr.AtomicCap = 7
	b.Reset()
	if err := writeHCA(&b, h, true); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"\ttransport:\t\t\tiWARP (1)\n",
		"\tatomic_cap:\t\t\tinvalid atomic capability (7)\n",
		"\t\t\tstate:\t\t\tinvalid state (0)\n",
		"\t\t\tmax_mtu:\t\tinvalid MTU (0)\n",
		"\t\t\tlink_layer:\t\tUnknown\n",
		"\t\t\tmax_vl_num:\t\tinvalid value (9)\n",
		"\t\t\tactive_width:\t\tinvalid width (3)\n",
		"\t\t\tactive_speed:\t\tinvalid speed (3)\n",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("output lacks %q", line)
		}
	}
	for _, absent := range []string{"fw_ver", "phys_state"} {
		if strings.Contains(b.String(), absent) {
			t.Errorf("output has %s:\n%s", absent, b.String())
		}
	}
}
