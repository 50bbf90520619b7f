package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/goverbs/goverbs/internal/ucma"
	"github.com/goverbs/goverbs/uverbs"
)

func init() { register("devices", "list RDMA devices, like ibv_devices", devices) }

func devices(args []string) int { return devicesTo(os.Stdout, os.Stderr, args) }

func devicesTo(stdout, stderr io.Writer, args []string) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: goverbs devices")
		return 2
	}
	devs, err := uverbs.Devices()
	if err != nil {
		return failTo(stderr, "%v", err)
	}
	if len(devs) == 0 {
		return failTo(stderr, "no RDMA devices found")
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 3, ' ', 0)
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
	fmt.Fprintln(stdout, cmStatus())
	return 0
}

// cmStatus says whether connecting by IP address (rdma_cm) works here:
// the device opens, and its ABI is one goverbs speaks.
func cmStatus() string {
	c, err := ucma.Open()
	if err != nil {
		return fmt.Sprintf("rdma_cm: not available (%v; the rdma_ucm module loads it)", err)
	}
	c.Close()
	abi, err := ucma.ABIVersion()
	if err != nil {
		return fmt.Sprintf("rdma_cm: not usable (%v)", err)
	}
	return fmt.Sprintf("rdma_cm: %s, ABI %d", ucma.DevicePath, abi)
}
