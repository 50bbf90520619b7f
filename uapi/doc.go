// Package uapi mirrors the kernel's RDMA user-space ABI headers in Go:
// the ids, constants and structs of rdma_user_ioctl_cmds.h,
// ib_user_ioctl_cmds.h, ib_user_ioctl_verbs.h, ib_user_verbs.h,
// rdma_user_rxe.h, mlx5-abi.h, mlx5_user_ioctl_cmds.h,
// mlx5_user_ioctl_verbs.h and rdma_user_ioctl.h (for RDMA_VERBS_IOCTL),
// what "rdma link" needs of rdma_netlink.h: the netlink clients, the
// RDMA_NLDEV_* commands and attributes, and RDMA_NL_GET_TYPE; and the
// rdma_cm's write commands of rdma_user_cm.h (RDMA_USER_CM_CMD_*, the
// RDMAUCM* structs, port spaces and options) with the SA path records of
// ib_user_sa.h and the socket addresses they hold ([SockaddrIn6],
// [KernelSockaddrStorage]).
//
// What the rdma_cm's kernel ABI leaves to librdmacm comes from
// rdma-core's rdma_cma.h and infiniband/ib.h (zrdmacm.go): the event
// numbers (RDMA_CM_EVENT_*), librdmacm's UD queue key and AF_IB service
// id constants, and [SockaddrIB] with AF_IB.
//
// It also mirrors what the mlx5 provider's data path needs of rdma-core's
// infiniband/mlx5dv.h, which is no kernel header: the device's ring
// formats. These are the CQE ([Mlx5CQE64], [Mlx5ErrCQE]), the WQE
// segments ([Mlx5WqeCtrlSeg], [Mlx5WqeRaddrSeg], [Mlx5WqeAtomicSeg],
// [Mlx5WqeDataSeg], [Mlx5WqeAv] in [Mlx5WqeDatagramSeg],
// [Mlx5WqeInlDataSeg], [Mlx5WqeSRQNextSeg]) and their constants: CQE
// opcodes and syndromes (MLX5_CQE_*), send opcodes (MLX5_OPCODE_*),
// control segment flags (MLX5_WQE_CTRL_*), the CQ doorbell (MLX5_CQ_*)
// and a few more. The device reads and writes all their multi-byte fields
// big-endian; the Go fields are plain unsigned integers, to be read and
// written with encoding/binary's BigEndian at their offsets.
//
// It holds names and no behaviour, and imports nothing of goverbs. Its two
// functions only make values: RDMA_NL_GET_TYPE, a macro of rdma_netlink.h,
// and NewPointer.
//
// # Generated
//
// The z*.go files are generated from the headers and checked in, with the
// generator kept in the tree (internal/cmd/genuapi), as golang.org/x/sys/unix
// does. Its inputs are pinned, as x/sys pins its kernel and glibc sources:
// the kernel's headers come from Debian's linux-libc-dev 6.1.176-1,
// mlx5dv.h from libibverbs-dev 44.0-2 and rdma_cma.h from librdmacm-dev
// 44.0-2 (rdma-core), never from the host's /usr/include. To regenerate, on linux/amd64 with gcc, run
//
//	make generate
//
// which runs go generate ./uapi/... and so the go:generate line of doc.go;
// the generator downloads the pinned packages with apt-get download into
// the goverbs cache and unpacks them there, without installing them. The
// first line of each file names the package it came from, and a test
// (internal/cmd/genuapi's TestUpToDate) regenerates everything from the
// same pins and fails on any difference.
//
// Every value, size and offset comes from the C compiler, never from
// reading the headers' arithmetic. A layout test holds every size and
// field offset, on every GOARCH the tests run on, to tables that a C
// program printed (testdata/layout.golden, testdata/mlx5dv.golden for
// mlx5dv.h and testdata/rdmacm.golden for librdmacm's headers). Building uapi needs neither cgo nor the headers.
//
// # Names
//
// Constants keep the headers' spelling, UVERBS_OBJECT_CQ or
// IB_USER_VERBS_CMD_CREATE_CQ, so that one search finds header and Go. They
// are untyped, as the headers' enums and macros are, and the same on every
// architecture: the one ioctl number, RDMA_VERBS_IOCTL, is an _IOWR, which
// all of Linux's ioctl encodings spell alike.
//
// A struct or union becomes a Go type named by splitting its C tag at '_'
// and joining the words capitalised, except these, which become:
// ib IB, cq CQ, qp QP, pd PD, mr MR, mw MW, ah AH, wc WC, wr WR, gid GID,
// srq SRQ, wq WQ, uar UAR, xrcd XRCD, id ID, qpn QPN, psn PSN, mtu MTU,
// lid LID, sge SGE, dm DM, dv DV, ex Ex, cqe CQE, cqe64 CQE64, uidx UIDX,
// bf BF, fd FD, mmap Mmap, rdma RDMA and ucm UCM. Fields follow the same rule on the member's
// name. So struct ib_uverbs_create_cq_resp is [IBUverbsCreateCQResp],
// struct rxe_queue_buf is [RxeQueueBuf] with field ProducerIndex,
// ib_uverbs_wc's wr_id is [IBUverbsWC].WRID, and struct mlx5_cqe64 is
// [Mlx5CQE64]. Each type's comment names its C struct and header.
//
// # Layout
//
// Every struct starts with a structs.HostLayout field and spells out its
// padding as _ fields, so its layout is the C one on every architecture,
// 32-bit ones included. Big-endian members (__be32) are plain integers
// marked in a comment: read them with encoding/binary's BigEndian. A named
// union becomes a byte array of its size, commented with its members; an
// anonymous one becomes its first member that fills it, named after it
// ([IBUverbsAttr].Data), or, where only an anonymous struct fills it, that
// struct's members, the union's others named in a comment
// ([Mlx5CQE64].WqeID). A member that a packed struct leaves unaligned is
// a byte array of its size ([Mlx5WqeCtrlSeg].DciStreamChannelID). A
// flexible array at a struct's end has no Go field, since Go would grow
// the struct to hold it; it starts at unsafe.Sizeof of the struct, as the
// struct's comment says. A __u64 that
// carries an address the kernel dereferences (a write command's response,
// the memory of reg_mr, mlx5 queue buffers and doorbells, the rdma_cm's
// option value) is a [Pointer].
//
// # No compatibility promise
//
// uapi is public because the generated mirrors of a public ABI are useful
// to read, not because programs should use them: it carries no user-facing
// API and no compatibility promise. Names and types follow the headers and
// the generator, and change when they do. Programs use uverbs and cq.
//
//go:generate go run ../internal/cmd/genuapi -o .
package uapi
