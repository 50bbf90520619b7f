package main

import "strings"

// hint adds advice for the failures people meet first.
func hint(msg string) string {
	switch {
	case strings.Contains(msg, "no RDMA devices"), strings.Contains(msg, "no such RDMA device"):
		return " (load a driver, or create a soft-RoCE device: goverbs link add rxe0 type rxe netdev IF; needs the rdma_rxe module)"
	case strings.Contains(msg, "permission denied"), strings.Contains(msg, "operation not permitted"):
		return " (run as root, or give the user access to /dev/infiniband and CAP_NET_ADMIN for links)"
	case strings.Contains(msg, "protocol not supported"):
		return " (is the ib_core module loaded? modprobe ib_core)"
	}
	return ""
}
