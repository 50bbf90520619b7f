package netlink

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// RDMALinkAdd creates a software RDMA device name of type linkType ("rxe")
// on netdev, like "rdma link add NAME type rxe netdev NETDEV".
func RDMALinkAdd(name, linkType, netdev string) error {
	b := NewBuilder(nil)
	b.String(uapi.RDMA_NLDEV_ATTR_DEV_NAME, name)
	b.String(uapi.RDMA_NLDEV_ATTR_LINK_TYPE, linkType)
	b.String(uapi.RDMA_NLDEV_ATTR_NDEV_NAME, netdev)
	_, err := rdmaDo(uapi.RDMA_NLDEV_CMD_NEWLINK, 0, b.Bytes())
	if err != nil {
		return fmt.Errorf("rdma link add %s type %s netdev %s: %w", name, linkType, netdev, err)
	}
	return nil
}

// RDMALinkDel deletes the software RDMA device name, like "rdma link delete NAME".
func RDMALinkDel(name string) error {
	devs, err := RDMADevices()
	if err != nil {
		return fmt.Errorf("rdma link delete %s: %w", name, err)
	}
	for _, d := range devs {
		if d.Name != name {
			continue
		}
		b := NewBuilder(nil)
		b.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, d.Index)
		if _, err := rdmaDo(uapi.RDMA_NLDEV_CMD_DELLINK, 0, b.Bytes()); err != nil {
			return fmt.Errorf("rdma link delete %s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("rdma link delete %s: no such RDMA device: %w", name, unix.ENODEV)
}

// RDMADevice is what RDMA_NLDEV_CMD_GET reports about one device.
type RDMADevice struct {
	Index     uint32
	Name      string
	NodeGUID  uint64
	SysGUID   uint64
	FWVersion string
	Protocol  string // "roce", "ib", "iw" (kernel ≥ 5.10)
	Ports     uint32
}

// RDMADevices lists the RDMA devices the kernel knows.
func RDMADevices() ([]RDMADevice, error) {
	msgs, err := rdmaDo(uapi.RDMA_NLDEV_CMD_GET, unix.NLM_F_DUMP, nil)
	if err != nil {
		return nil, err
	}
	out := make([]RDMADevice, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, parseDevice(m.Payload))
	}
	return out, nil
}

// parseDevice decodes one RDMA_NLDEV_CMD_GET reply.
func parseDevice(b []byte) RDMADevice {
	var d RDMADevice
	for _, a := range ParseAttrs(b) {
		switch a.Type {
		case uapi.RDMA_NLDEV_ATTR_DEV_INDEX:
			d.Index = a.Uint32()
		case uapi.RDMA_NLDEV_ATTR_DEV_NAME:
			d.Name = a.String()
		case uapi.RDMA_NLDEV_ATTR_NODE_GUID:
			d.NodeGUID = a.Uint64()
		case uapi.RDMA_NLDEV_ATTR_SYS_IMAGE_GUID:
			d.SysGUID = a.Uint64()
		case uapi.RDMA_NLDEV_ATTR_FW_VERSION:
			d.FWVersion = a.String()
		case uapi.RDMA_NLDEV_ATTR_DEV_PROTOCOL:
			d.Protocol = a.String()
		case uapi.RDMA_NLDEV_ATTR_PORT_INDEX:
			d.Ports = a.Uint32()
		}
	}
	return d
}

// RDMALink is one port of an RDMA device and the netdev under it, as
// "rdma link show" prints it.
type RDMALink struct {
	Device    string
	Port      uint32
	State     uint8 // enum ib_port_state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE
	PhysState uint8 // 5 LINK_UP, 3 DISABLED, …
	Netdev    string
}

// RDMALinks lists every port of every RDMA device. The kernel dumps ports
// one device at a time (a port dump needs RDMA_NLDEV_ATTR_DEV_INDEX).
func RDMALinks() ([]RDMALink, error) {
	devs, err := RDMADevices()
	if err != nil {
		return nil, err
	}
	var out []RDMALink
	for _, d := range devs {
		b := NewBuilder(nil)
		b.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, d.Index)
		msgs, err := rdmaDo(uapi.RDMA_NLDEV_CMD_PORT_GET, unix.NLM_F_DUMP, b.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Name, err)
		}
		for _, m := range msgs {
			out = append(out, parseLink(d.Name, m.Payload))
		}
	}
	return out, nil
}

// parseLink decodes one RDMA_NLDEV_CMD_PORT_GET reply about a port of
// device.
func parseLink(device string, b []byte) RDMALink {
	l := RDMALink{Device: device}
	for _, a := range ParseAttrs(b) {
		switch a.Type {
		case uapi.RDMA_NLDEV_ATTR_PORT_INDEX:
			l.Port = a.Uint32()
		case uapi.RDMA_NLDEV_ATTR_PORT_STATE:
			l.State = a.Uint8()
		case uapi.RDMA_NLDEV_ATTR_PORT_PHYS_STATE:
			l.PhysState = a.Uint8()
		case uapi.RDMA_NLDEV_ATTR_NDEV_NAME:
			l.Netdev = a.String()
		}
	}
	return l
}

// Chardev is what RDMA_NLDEV_CMD_GET_CHARDEV says of a device's uverbs
// char device: how rdma-core learns the driver id it must stamp on ioctls.
type Chardev struct {
	Name     string // "uverbs0"
	ABI      uint64
	Dev      uint64 // dev_t
	DriverID uint32 // enum rdma_driver_id; HaveDriverID is false on kernels that do not say
	// HaveDriverID says whether the kernel reported DriverID.
	HaveDriverID bool
}

// UverbsChardev returns the uverbs char device of the RDMA device with
// netlink index devIndex.
func UverbsChardev(devIndex uint32) (Chardev, error) {
	b := NewBuilder(nil)
	b.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, devIndex)
	b.String(uapi.RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs")
	msgs, err := rdmaDo(uapi.RDMA_NLDEV_CMD_GET_CHARDEV, 0, b.Bytes())
	if err != nil {
		return Chardev{}, err
	}
	var c Chardev
	for _, m := range msgs {
		parseChardev(&c, m.Payload)
	}
	return c, nil
}

// parseChardev decodes one RDMA_NLDEV_CMD_GET_CHARDEV reply into c.
func parseChardev(c *Chardev, b []byte) {
	for _, a := range ParseAttrs(b) {
		switch a.Type {
		case uapi.RDMA_NLDEV_ATTR_CHARDEV_NAME:
			c.Name = a.String()
		case uapi.RDMA_NLDEV_ATTR_CHARDEV_ABI:
			c.ABI = a.Uint64()
		case uapi.RDMA_NLDEV_ATTR_CHARDEV:
			c.Dev = a.Uint64()
		case uapi.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID:
			c.DriverID, c.HaveDriverID = a.Uint32(), true
		}
	}
}

func rdmaDo(cmd uint16, flags uint16, payload []byte) ([]Message, error) {
	c, err := Dial(unix.NETLINK_RDMA)
	if err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) {
			return nil, fmt.Errorf("%w (is the ib_core module loaded?)", err)
		}
		return nil, err
	}
	defer c.Close()
	return c.Execute(uapi.RDMA_NL_GET_TYPE(uapi.RDMA_NL_NLDEV, cmd), flags, payload)
}
