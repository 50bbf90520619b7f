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
	}},
}

// keepMlx5DV takes, of mlx5dv.h's constants, those of the verbs data
// path: CQE opcodes, owner bit and syndromes, the CQ doorbell, send
// opcodes, control segment flags and the doorbell record indices.
func keepMlx5DV(name string, _ constGroup) bool {
	for _, p := range []string{"MLX5_CQE_", "MLX5_CQ_DB_", "MLX5_OPCODE_", "MLX5_WQE_CTRL_", "MLX5_INLINE_"} {
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
}
