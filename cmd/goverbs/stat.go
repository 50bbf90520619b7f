package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The stat subcommand shows what iproute2's "rdma statistic show" shows:
// every port's hardware counters, one line a port, through RDMA netlink
// (internal/netlink.RDMAPortCounters, which uverbs' Context.PortCounters
// reads too). Per-QP counters (rdma statistic qp, mode, set, bind) are
// left out: they need a device that binds counters to QPs, and rxe binds
// none (rdma statistic qp set refuses there). The Linux half is
// stat_linux.go.

func init() { register("stat", "ports' hardware counters, like rdma statistic show", stat) }

func stat(args []string) int { return statTo(os.Stdout, os.Stderr, args) }

const statUsage = `usage: goverbs stat [show] [link [DEV[/PORT]]]   every port's hardware counters, or DEV's, or one port's`

// statCmd is a parsed stat command line.
type statCmd struct {
	help bool
	dev  string // "" for every device
	port uint32 // 0 for every port of dev
}

// parseStat reads stat's arguments as "rdma statistic" takes them.
func parseStat(args []string) (statCmd, error) {
	var c statCmd
	if len(args) > 0 {
		switch w, _ := matchWord(args[0], "show", "list", "help", "qp", "mr", "mode", "set", "unset"); w {
		case "help":
			return statCmd{help: true}, nil
		case "show", "list":
			args = args[1:]
		case "qp", "mr", "mode", "set", "unset":
			return c, fmt.Errorf("stat %s: not supported: goverbs stat shows the ports' counters only (per-QP counters need a device that binds them, and rxe binds none)", w)
		}
	}
	if len(args) == 0 {
		return c, nil
	}
	if w, _ := matchWord(args[0], "link"); w != "link" {
		return c, fmt.Errorf("stat: unknown argument %q (want link DEV[/PORT])", args[0])
	}
	switch len(args) {
	case 1:
		return c, nil
	case 2:
	default:
		return c, fmt.Errorf("stat: too many arguments after link %s", args[1])
	}
	v := args[1]
	i := strings.LastIndexByte(v, '/')
	if i < 0 || i == len(v)-1 {
		c.dev = strings.TrimSuffix(v, "/")
		return c, nil
	}
	c.dev = v[:i]
	p, err := strconv.ParseUint(v[i+1:], 10, 32)
	if err != nil || p == 0 {
		return c, fmt.Errorf("stat: bad port in link %q (DEV or DEV/PORT, from 1)", v)
	}
	c.port = uint32(p)
	return c, nil
}

// statUsageError reports a usage error and returns exit status 2.
func statUsageError(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "goverbs: %v\n%s\n", err, statUsage)
	return 2
}
