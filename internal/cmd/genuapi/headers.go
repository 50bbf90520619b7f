package main

import (
	"slices"
	"strings"
)

// A header is one uapi header that genuapi mirrors.
type header struct {
	path    string                               // under the include directory
	keep    func(name string, g constGroup) bool // which constants to take; nil takes all
	structs bool                                 // whether to mirror its structs and unions
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
