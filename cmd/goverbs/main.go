// Command goverbs is the goverbs tool: one static binary for RDMA work
// from a shell.
//
// Usage:
//
//	goverbs devices    list RDMA devices, like ibv_devices, with what sysfs says of each
//
// More subcommands (devinfo, link, pingpong, perf) follow.
package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/goverbs/goverbs/uverbs"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: goverbs devices")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "devices":
		os.Exit(devices())
	case "-h", "-help", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "goverbs: unknown command %q\n", os.Args[1])
		usage()
	}
}

func devices() int {
	devs, err := uverbs.Devices()
	if err != nil {
		fmt.Fprintln(os.Stderr, "goverbs:", err)
		return 1
	}
	if len(devs) == 0 {
		fmt.Fprintln(os.Stderr, "goverbs: no RDMA devices found (load a driver, or create a soft-RoCE device: rdma link add rxe0 type rxe netdev IF)")
		return 1
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "device\tnode GUID\tuverbs\tABI\tnetdev/driver")
	fmt.Fprintln(w, "------\t---------\t------\t---\t-------------")
	for _, d := range devs {
		under := d.Parent
		if under == "" {
			under = d.Driver
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", d.Name, d.NodeGUID, d.Path, d.ABIVersion, under)
	}
	w.Flush()
	return 0
}
