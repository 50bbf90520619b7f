// Package uapi mirrors the kernel's RDMA user-space ABI headers in Go:
// the ids, constants and structs of rdma_user_ioctl_cmds.h,
// ib_user_ioctl_cmds.h, ib_user_ioctl_verbs.h, ib_user_verbs.h,
// rdma_user_rxe.h, mlx5-abi.h, mlx5_user_ioctl_cmds.h and what goverbs
// needs of rdma_netlink.h.
//
// Its files will be generated from the C headers and checked in, with the
// generator kept in the tree (make generate), as golang.org/x/sys/unix
// does; a layout test will hold every size and offset against the headers.
// It holds names, no behaviour, and imports nothing of goverbs.
//
// It is empty so far.
package uapi
