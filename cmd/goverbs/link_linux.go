package main

import (
	"fmt"
	"io"

	"github.com/goverbs/goverbs/internal/netlink"
)

// linkTo runs link with args, printing to stdout and its errors to
// stderr, and returns the exit status. Like iproute2, add and del print
// nothing when they succeed.
func linkTo(stdout, stderr io.Writer, args []string) int {
	c, err := parseLink(args)
	if err != nil {
		return linkUsageError(stderr, err)
	}
	switch c.op {
	case "add":
		// The error names the command ("rdma link add NAME type …") and
		// carries the kernel's errno and extended-ack text.
		if err := netlink.RDMALinkAdd(c.name, c.typ, c.netdev); err != nil {
			return failTo(stderr, "%v", err)
		}
	case "del":
		if err := netlink.RDMALinkDel(c.name); err != nil {
			return failTo(stderr, "%v", err)
		}
	case "show":
		links, err := netlink.RDMALinks()
		if err != nil {
			return failTo(stderr, "rdma link show: %v", err)
		}
		found := false
		for _, l := range links {
			if (c.name != "" && l.Device != c.name) || (c.port != 0 && l.Port != c.port) {
				continue
			}
			found = true
			fmt.Fprintln(stdout, linkLine(l.Device, l.Port, l.State, l.PhysState, l.Netdev))
		}
		if !found && c.name != "" {
			if c.port != 0 {
				return failTo(stderr, "rdma link show %s/%d: no such RDMA device or port", c.name, c.port)
			}
			return failTo(stderr, "rdma link show %s: no such RDMA device", c.name)
		}
	}
	return 0
}
