package main

import (
	"fmt"
	"io"
	"strings"
)

// hint adds advice for the failures people meet first.
func hint(msg string) string {
	switch {
	case strings.Contains(msg, "is the ib_core module loaded?"):
		return "" // internal/netlink has said it
	case strings.Contains(msg, "rdma link add"):
		if h := linkAddHint(msg); h != "" {
			return h
		}
	case strings.Contains(msg, "rdma link delete"):
		if h := linkDelHint(msg); h != "" {
			return h
		}
	}
	switch {
	case strings.Contains(msg, "rdma_cm: no such file or directory"): // rping: no /dev/infiniband/rdma_cm
		return " (load the RDMA connection manager: modprobe rdma_ucm)"
	case strings.Contains(msg, "no RDMA devices"), strings.Contains(msg, "no such RDMA device"):
		return " (load a driver, or create a soft-RoCE device: goverbs link add rxe0 type rxe netdev IF; needs the rdma_rxe module)"
	case strings.Contains(msg, "permission denied"), strings.Contains(msg, "operation not permitted"):
		return " (run as root, or give the user access to /dev/infiniband and CAP_NET_ADMIN for links)"
	case strings.Contains(msg, "protocol not supported"):
		return " (is the ib_core module loaded? modprobe ib_core)"
	}
	return ""
}

// linkAddHint explains the errors of RDMA_NLDEV_CMD_NEWLINK. The kernel
// (nldev_newlink) answers ENODEV when the netdev is missing and EINVAL
// when no module registers the link type, even after it asked modprobe
// for "rdma-link-TYPE"; kernels before 5.1 have no NEWLINK at all
// (EOPNOTSUPP). rxe answers EEXIST when the netdev already carries an rxe
// device, and device registration ENFILE when the name is taken.
func linkAddHint(msg string) string {
	switch {
	case strings.Contains(msg, "no such device"):
		return " (no network device of that name: ip link show)"
	case strings.Contains(msg, "invalid argument"), strings.Contains(msg, "operation not supported"),
		strings.Contains(msg, "no such file or directory"):
		return " (is the link type's module loaded? modprobe rdma_rxe; needs kernel >= 5.1)"
	case strings.Contains(msg, "file exists"), strings.Contains(msg, "too many open files in system"):
		return " (the name is taken, or the netdev already has an rxe device: goverbs link show)"
	}
	return ""
}

// linkDelHint explains the errors of RDMA_NLDEV_CMD_DELLINK: the kernel
// (nldev_dellink) answers EINVAL for a device that was not made by a
// link add.
func linkDelHint(msg string) string {
	switch {
	case strings.Contains(msg, "no such RDMA device"):
		return " (goverbs link show lists them)"
	case strings.Contains(msg, "invalid argument"):
		return " (only software devices made by link add can be deleted)"
	}
	return ""
}

// failTo is fail for subcommands that are given their output streams: it
// writes the error line, with its hint, to w and returns exit status 1.
func failTo(w io.Writer, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(w, "goverbs: "+msg+hint(msg))
	return 1
}
