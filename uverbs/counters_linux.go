package uverbs

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/netlink"
)

// PortCounters reads port's hardware counters, in the driver's order:
// what "rdma statistic show link DEV/PORT" prints and the port's sysfs
// hw_counters directory holds. They come from RDMA netlink
// (RDMA_NLDEV_CMD_STAT_GET, kernel >= 5.3), which names the device by
// its index: PortCounters looks the index up by the Context's device
// name each time, so a device renamed since Open is not found (ENODEV).
// A port the device lacks gives an error wrapping EINVAL, as does a
// device that keeps no counters.
func (c *Context) PortCounters(port int) ([]Counter, error) {
	const op = "read port counters"
	if err := checkPort(port); err != nil {
		return nil, c.opErr(op, err)
	}
	if err := c.use(op); err != nil {
		return nil, err
	}
	defer c.done()
	devs, err := netlink.RDMADevices()
	if err != nil {
		return nil, c.opErr(op, err)
	}
	for _, d := range devs {
		if d.Name != c.dev.Name {
			continue
		}
		if uint32(port) > d.Ports {
			return nil, c.opErr(op, fmt.Errorf("port %d beyond the device's %d: %w", port, d.Ports, unix.EINVAL))
		}
		hw, err := netlink.RDMAPortCounters(d.Index, uint32(port))
		if err != nil {
			return nil, c.opErr(op, fmt.Errorf("port %d: %w", port, err))
		}
		out := make([]Counter, len(hw))
		for i, h := range hw {
			out[i] = Counter(h)
		}
		return out, nil
	}
	return nil, c.opErr(op, fmt.Errorf("RDMA netlink lists no device of this name: %w", unix.ENODEV))
}
