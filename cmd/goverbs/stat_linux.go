package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/goverbs/goverbs/internal/netlink"
)

// statTo runs stat with args, printing to stdout and its errors to
// stderr, and returns the exit status.
func statTo(stdout, stderr io.Writer, args []string) int {
	c, err := parseStat(args)
	if err != nil {
		return statUsageError(stderr, err)
	}
	if c.help {
		fmt.Fprintln(stdout, statUsage)
		return 0
	}
	const what = "rdma statistic show"
	devs, err := netlink.RDMADevices()
	if err != nil {
		return failTo(stderr, "%s: %v", what, err)
	}
	if c.dev != "" {
		devs = devsNamed(devs, c.dev)
		if len(devs) == 0 {
			return failTo(stderr, "%s link %s: no such RDMA device", what, c.dev)
		}
		if c.port > devs[0].Ports {
			return failTo(stderr, "%s link %s/%d: %s has no port %d", what, c.dev, c.port, c.dev, c.port)
		}
	}
	var out strings.Builder
	for _, d := range devs {
		for p := uint32(1); p <= d.Ports; p++ {
			if c.port != 0 && p != c.port {
				continue
			}
			cs, err := netlink.RDMAPortCounters(d.Index, p)
			if err != nil {
				return failTo(stderr, "%s link %s/%d: %v", what, d.Name, p, err)
			}
			out.WriteString(statLine(d.Name, p, cs))
		}
	}
	io.WriteString(stdout, out.String())
	return 0
}

// statLine is one port's line of "rdma statistic show": "link rxe0/1
// sent_pkts 12 rcvd_pkts 12 … ", every field followed by a space.
func statLine(dev string, port uint32, cs []netlink.HWCounter) string {
	var l resLine
	l.add("link %s/%d", dev, port)
	for _, c := range cs {
		l.add("%s %d", c.Name, c.Value)
	}
	return l.end()
}
