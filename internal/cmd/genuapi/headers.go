package main

import (
	"slices"
	"strings"
)

// A header is one header that genuapi mirrors.
type header struct {
	path    string                               // under the include directory
	keep    func(name string, g constGroup) bool // which constants to take; nil takes all
	structs bool                                 // whether to mirror its structs and unions
	tags    []string                             // with structs: only these tags ("struct mlx5_cqe64"); nil takes all
}

// A unit is headers that genuapi compiles together, in C programs of
// their own, and the files it writes of them.
type unit struct {
	name    string // in messages
	headers []header
	nested  []nestedOffset
}

// headers lists what uapi mirrors, in the order its files present them.
var headers = []header{
	{path: "rdma/rdma_user_ioctl_cmds.h", structs: true},
	{path: "rdma/ib_user_ioctl_cmds.h", structs: true},
	{path: "rdma/ib_user_ioctl_verbs.h", structs: true},
	{path: "rdma/ib_user_verbs.h", structs: true},
	{path: "rdma/rdma_user_rxe.h", structs: true},
	{path: "rdma/mlx5-abi.h", structs: true},
	{path: "rdma/mlx5_user_ioctl_cmds.h", structs: true},
	{path: "rdma/mlx5_user_ioctl_verbs.h", structs: true},
	// RDMA_VERBS_IOCTL reaches users through this header, which includes
	// rdma_user_ioctl_cmds.h (where it is defined). What the header defines
	// itself are the ib_umad and hfi1 ioctls: not verbs, so none is taken.
	{path: "rdma/rdma_user_ioctl.h", keep: func(string, constGroup) bool { return false }},
	// Of the RDMA netlink names, what "rdma link"/"rdma dev" need: the
	// netlink clients and the nldev commands, attributes and print types.
	// RDMA_NL_GET_TYPE is hand-written in uapi/rdma_netlink.go.
	{path: "rdma/rdma_netlink.h", keep: func(name string, g constGroup) bool {
		return strings.HasPrefix(name, "RDMA_NLDEV_") || slices.Contains(g.names, "RDMA_NL_NLDEV")
	}},
	// The rdma_cm's ABI (the ucma write commands on /dev/infiniband/rdma_cm)
	// and the SA path records its route queries answer with. Its structs
	// hold socket addresses, whose kernel types come from linux/in6.h and
	// linux/socket.h: of those headers only these structs are taken.
	{path: "linux/in6.h", keep: func(string, constGroup) bool { return false }, structs: true,
		tags: []string{"struct in6_addr", "struct sockaddr_in6"}},
	{path: "linux/socket.h", keep: func(string, constGroup) bool { return false }, structs: true,
		tags: []string{"struct __kernel_sockaddr_storage"}},
	{path: "rdma/ib_user_sa.h", structs: true},
	{path: "rdma/rdma_user_cm.h", structs: true},
}

// rdmacmHeaders are librdmacm's (rdma-core), for what the kernel's
// rdma_user_cm.h leaves to the library: the numbers of the events that
// GET_EVENT reports (enum rdma_cm_event_type, which the kernel keeps in
// a header of its own that is not uapi), librdmacm's constants for UD
// and for AF_IB service ids, and struct sockaddr_ib with AF_IB, whose
// kernel definition (include/rdma/ib.h) is not uapi either. The port
// spaces, option names and multicast join flags that rdma_cma.h repeats
// come from the kernel's header, so they are left out here, as are the
// copies of the kernel's command structs in rdma_cma_abi.h.
var rdmacmHeaders = []header{
	{path: "rdma/rdma_cma.h", keep: keepRDMACM},
	// The range of the kernel's ABI versions that librdmacm accepts.
	{path: "rdma/rdma_cma_abi.h", keep: func(name string, _ constGroup) bool {
		return name == "RDMA_USER_CM_MIN_ABI_VERSION" || name == "RDMA_USER_CM_MAX_ABI_VERSION"
	}},
	{path: "infiniband/ib.h", keep: func(name string, _ constGroup) bool { return name == "AF_IB" },
		structs: true, tags: []string{"struct ib_addr", "struct sockaddr_ib"}},
}

// keepRDMACM takes, of rdma_cma.h's constants, the event numbers and
// those that describe what goes over the wire or into the kernel.
func keepRDMACM(name string, _ constGroup) bool {
	if strings.HasPrefix(name, "RDMA_CM_EVENT_") || strings.HasPrefix(name, "RDMA_IB_") {
		return true
	}
	switch name {
	case "RDMA_UDP_QKEY", "RDMA_MAX_RESP_RES", "RDMA_MAX_INIT_DEPTH":
		return true
	}
	return false
}

// mlx5dvHeaders are rdma-core's public header of the mlx5 provider, for
// the formats of the device's rings: the CQE, the WQE segments a send or
// receive queue holds, and the constants that go in them or in the
// doorbells. It is not a kernel header: the files it becomes are separate
// (zmlx5dv.go), and its C programs include it without the kernel's uapi
// headers, whose include guards its copies of them share.
var mlx5dvHeaders = []header{
	{path: "infiniband/mlx5dv.h", keep: keepMlx5DV, structs: true, tags: []string{
		"struct mlx5_err_cqe",
		"struct mlx5_cqe64",
		"struct mlx5_wqe_srq_next_seg",
		"struct mlx5_wqe_data_seg",
		"struct mlx5_wqe_ctrl_seg",
		"struct mlx5_wqe_av",
		"struct mlx5_wqe_datagram_seg",
		"struct mlx5_wqe_raddr_seg",
		"struct mlx5_wqe_atomic_seg",
		"struct mlx5_wqe_inl_data_seg",
		"struct mlx5_wqe_umr_ctrl_seg",
		"struct mlx5_wqe_umr_klm_seg",
		"struct mlx5_wqe_mkey_context_seg",
	}},
}

// keepMlx5DV takes, of mlx5dv.h's constants, those of the verbs data
// path: CQE opcodes, owner bit and syndromes, the CQ doorbell, send
// opcodes, control segment flags, the UMR segments' flags and masks (the
// memory-window WQEs) and the doorbell record indices.
func keepMlx5DV(name string, _ constGroup) bool {
	for _, p := range []string{"MLX5_CQE_", "MLX5_CQ_DB_", "MLX5_OPCODE_", "MLX5_WQE_CTRL_", "MLX5_INLINE_",
		"MLX5_WQE_UMR_CTRL_", "MLX5_WQE_MKEY_CONTEXT_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	switch name {
	case "MLX5_CQ_DOORBELL", "MLX5_INVALID_LKEY", "MLX5_EXTENDED_UD_AV",
		"MLX5_SEND_WQE_BB", "MLX5_SEND_WQE_SHIFT", "MLX5_RCV_DBR", "MLX5_SND_DBR":
		return true
	}
	return false
}

// pointerFields are the __aligned_u64 members that carry a user-space
// address the kernel dereferences (copies to or from, or pins): they are
// generated as Pointer, not uint64, so that the garbage collector sees
// what they point to. Members declared with RDMA_UAPI_PTR are added to
// these. Handles and cookies the kernel only echoes back (user_handle),
// and addresses in the device's view (hca_va, iova, sge addr) stay uint64.
var pointerFields = map[string][]string{
	// The legacy write commands: the kernel writes the response here.
	"*": {"response"},
	// The MR's memory, which the kernel pins.
	"ib_uverbs_reg_mr":   {"start"},
	"ib_uverbs_rereg_mr": {"start"},
	// rxe: where the kernel writes the SRQ's new struct mminfo.
	"rxe_modify_srq_cmd": {"mmap_info_addr"},
	// mlx5: the queue buffers and doorbell records, which the kernel pins.
	"mlx5_ib_create_cq":  {"buf_addr", "db_addr"},
	"mlx5_ib_resize_cq":  {"buf_addr"},
	"mlx5_ib_create_srq": {"buf_addr", "db_addr"},
	"mlx5_ib_create_qp":  {"buf_addr", "db_addr"},
	"mlx5_ib_create_wq":  {"buf_addr", "db_addr"},
	// rdma_cm: the option value, which the kernel copies in.
	"rdma_ucm_set_option": {"optval"},
}
