package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The link subcommand does what iproute2's "rdma link" does for software
// RDMA devices, through internal/netlink; the Linux half is
// link_linux.go.

func init() { register("link", "add, delete or show RDMA links, like rdma link", link) }

func link(args []string) int { return linkTo(os.Stdout, os.Stderr, args) }

const linkUsage = `usage: goverbs link add NAME type TYPE netdev IF   create a software RDMA device (TYPE rxe, siw)
       goverbs link del NAME                        delete one (also: delete)
       goverbs link show [NAME[/PORT]]              list RDMA links`

// linkCmd is a parsed link command line.
type linkCmd struct {
	op     string // "add", "del", "show"
	name   string // the device; for show, "" for all
	port   uint32 // show only: 0 for every port
	typ    string // add only
	netdev string // add only
}

// parseLink reads link's arguments, as "rdma link" takes them.
func parseLink(args []string) (linkCmd, error) {
	if len(args) == 0 {
		return linkCmd{op: "show"}, nil // "rdma link" alone shows
	}
	var c linkCmd
	switch op, rest := args[0], args[1:]; op {
	case "add":
		c.op = "add"
		if len(rest) == 0 {
			return c, fmt.Errorf("link add: missing NAME")
		}
		c.name, rest = rest[0], rest[1:]
		for len(rest) > 0 {
			if len(rest) < 2 {
				return c, fmt.Errorf("link add: %q needs a value", rest[0])
			}
			switch rest[0] {
			case "type":
				c.typ = rest[1]
			case "netdev":
				c.netdev = rest[1]
			default:
				return c, fmt.Errorf("link add: unknown keyword %q", rest[0])
			}
			rest = rest[2:]
		}
		if c.typ == "" || c.netdev == "" {
			return c, fmt.Errorf("link add %s: needs type TYPE and netdev IF", c.name)
		}
	case "del", "delete":
		c.op = "del"
		if len(rest) != 1 {
			return c, fmt.Errorf("link del: needs exactly one NAME")
		}
		c.name = rest[0]
	case "show", "list", "ls":
		c.op = "show"
		switch len(rest) {
		case 0:
		case 1:
			name, port, ok := strings.Cut(rest[0], "/")
			c.name = name
			if ok {
				p, err := strconv.ParseUint(port, 10, 32)
				if err != nil || p == 0 {
					return c, fmt.Errorf("link show: bad port in %q", rest[0])
				}
				c.port = uint32(p)
			}
		default:
			return c, fmt.Errorf("link show: too many arguments")
		}
	default:
		return c, fmt.Errorf("link: unknown command %q", op)
	}
	if c.name == "" && c.op != "show" {
		return c, fmt.Errorf("link %s: empty NAME", c.op)
	}
	return c, nil
}

// linkUsageError reports a usage error and returns exit status 2.
func linkUsageError(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "goverbs: %v\n%s\n", err, linkUsage)
	return 2
}

// portStateNames and physStateNames are iproute2's names for the states
// RDMA netlink reports (enum ib_port_state, and the PortPhysicalState of
// the InfiniBand PortInfo, OPA's included).
var (
	portStateNames = []string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}
	physStateNames = []string{"NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP",
		"LINK_ERROR_RECOVER", "PHY_TEST", "UNKNOWN", "OPA_OFFLINE", "UNKNOWN", "OPA_TEST"}
)

func stateName(names []string, v uint8) string {
	if int(v) < len(names) {
		return names[v]
	}
	return "UNKNOWN"
}

// linkLine is one line of "rdma link show":
// "link rxe0/1 state ACTIVE physical_state LINK_UP netdev d0".
func linkLine(dev string, port uint32, state, phys uint8, netdev string) string {
	s := fmt.Sprintf("link %s/%d state %s physical_state %s", dev, port,
		stateName(portStateNames, state), stateName(physStateNames, phys))
	if netdev != "" {
		s += " netdev " + netdev
	}
	return s
}
