package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/goverbs/goverbs/uverbs"
)

func init() { register("devices", "list RDMA devices, like ibv_devices", devices) }

func devices(args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(os.Stderr, "usage: goverbs devices")
		return 2
	}
	devs, err := uverbs.Devices()
	if err != nil {
		return fail("%v", err)
	}
	if len(devs) == 0 {
		return fail("no RDMA devices found")
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
