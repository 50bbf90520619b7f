package uverbs

import (
	"fmt"
	"strings"

	"github.com/goverbs/goverbs/internal/errs"
)

// Device describes one RDMA device as sysfs shows it, without opening it.
type Device struct {
	Name         string // the ibdev name, "rxe0", "mlx5_0"
	Uverbs       string // its uverbs char device name, "uverbs0"
	Path         string // "/dev/infiniband/uverbs0"
	NodeGUID     GUID
	SysImageGUID GUID
	NodeType     string // "1: CA"
	ABIVersion   int    // the driver's uverbs ABI version (rxe 2, mlx5 1)
	CoreABI      int    // the core write ABI (/sys/class/infiniband_verbs/abi_version, 6)
	Driver       string // the kernel driver behind a hardware device ("mlx5_core"), "" for software ones
	Parent       string // for software devices: the netdev under it ("d0"), else ""
	// DriverID is the device's enum rdma_driver_id (rxe 14, mlx5 1), which
	// every ioctl must carry; 0 (RDMA_DRIVER_UNKNOWN) if the kernel did not
	// say. It comes from RDMA netlink, as in rdma-core.
	DriverID uint32
}

// GUID is a 64-bit global identifier, in host order.
type GUID uint64

// String formats the GUID as sysfs and ibv_devinfo do: "0250:b6ff:fe5d:20f8".
func (g GUID) String() string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", uint16(g>>48), uint16(g>>32), uint16(g>>16), uint16(g))
}

// ParseGUID reads the sysfs form "0250:b6ff:fe5d:20f8".
func ParseGUID(s string) (GUID, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 4 {
		return 0, fmt.Errorf("bad GUID %s", errs.Quote(s))
	}
	var g GUID
	for _, p := range parts {
		var v uint16
		if len(p) == 0 || len(p) > 4 {
			return 0, fmt.Errorf("bad GUID %s", errs.Quote(s))
		}
		for _, c := range p {
			var d uint16
			switch {
			case c >= '0' && c <= '9':
				d = uint16(c - '0')
			case c >= 'a' && c <= 'f':
				d = uint16(c-'a') + 10
			case c >= 'A' && c <= 'F':
				d = uint16(c-'A') + 10
			default:
				return 0, fmt.Errorf("bad GUID %s", errs.Quote(s))
			}
			v = v<<4 | d
		}
		g = g<<16 | GUID(v)
	}
	return g, nil
}
