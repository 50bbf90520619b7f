package uverbs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/netlink"
)

// sysfs roots; tests may point them elsewhere.
var (
	sysVerbs = "/sys/class/infiniband_verbs"
	sysIB    = "/sys/class/infiniband"
	devDir   = "/dev/infiniband"
)

// Devices lists the RDMA devices that have a uverbs char device, sorted by
// name. No devices is not an error: the list is empty.
func Devices() ([]Device, error) {
	core := -1
	if b, err := os.ReadFile(filepath.Join(sysVerbs, "abi_version")); err == nil {
		core, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	ents, err := os.ReadDir(sysVerbs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no ib_uverbs module: no devices
	}
	if err != nil {
		return nil, &OpError{Op: "list devices", Err: err}
	}
	ids := driverIDs()
	var out []Device
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		d, err := readDevice(e.Name(), core)
		if errors.Is(err, fs.ErrNotExist) {
			continue // going away as we look (rdma link del): not listed
		}
		if err != nil {
			return nil, &OpError{Op: "list devices", Err: err}
		}
		d.DriverID = ids[d.Name]
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeviceByName returns the device whose ibdev name is name.
func DeviceByName(name string) (Device, error) {
	devs, err := Devices()
	if err != nil {
		return Device{}, err
	}
	var have []string
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
		have = append(have, d.Name)
	}
	msg := "no such RDMA device"
	if len(have) > 0 {
		msg += " (have: " + strings.Join(have, ", ") + ")"
	} else {
		msg += " (no RDMA devices; is a driver or rdma_rxe loaded?)"
	}
	return Device{}, &OpError{Op: "open", Device: name, Err: fmt.Errorf("%s: %w", msg, unix.ENODEV)}
}

func readDevice(uverbs string, core int) (Device, error) {
	dir := filepath.Join(sysVerbs, uverbs)
	d := Device{Uverbs: uverbs, Path: filepath.Join(devDir, uverbs), CoreABI: core}
	var err error
	if d.Name, err = readString(filepath.Join(dir, "ibdev")); err != nil {
		return d, err
	}
	abi, err := readString(filepath.Join(dir, "abi_version"))
	if err != nil {
		return d, err
	}
	if d.ABIVersion, err = strconv.Atoi(abi); err != nil {
		return d, fmt.Errorf("%s/abi_version: %w", dir, err)
	}
	ib := filepath.Join(sysIB, d.Name)
	for _, g := range []struct {
		file string
		dst  *GUID
	}{{"node_guid", &d.NodeGUID}, {"sys_image_guid", &d.SysImageGUID}} {
		s, err := readString(filepath.Join(ib, g.file))
		if err != nil {
			return d, err
		}
		if *g.dst, err = ParseGUID(s); err != nil {
			return d, fmt.Errorf("%s/%s: %w", ib, g.file, err)
		}
	}
	d.NodeType, _ = readString(filepath.Join(ib, "node_type"))
	d.Parent, _ = readString(filepath.Join(ib, "parent"))
	if link, err := os.Readlink(filepath.Join(ib, "device", "driver")); err == nil {
		d.Driver = filepath.Base(link)
	}
	return d, nil
}

// driverIDs asks RDMA netlink for each device's driver id. Failures leave
// the map short: Open then reports the device as unsupported.
func driverIDs() map[string]uint32 {
	ids := map[string]uint32{}
	devs, err := netlink.RDMADevices()
	if err != nil {
		return ids
	}
	for _, d := range devs {
		if cd, err := netlink.UverbsChardev(d.Index); err == nil && cd.HaveDriverID {
			ids[d.Name] = cd.DriverID
		}
	}
	return ids
}

func readString(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
