package netlink

import (
	"fmt"

	"github.com/goverbs/goverbs/uapi"
)

// ClientChardev returns the char device of an RDMA client that serves
// every device at once, by the client's name: "rdma_cm" for the
// connection manager's /dev/infiniband/rdma_cm. It is
// RDMA_NLDEV_CMD_GET_CHARDEV with RDMA_NLDEV_ATTR_CHARDEV_TYPE and no
// device index, the request librdmacm makes for the rdma_cm's ABI version
// (kernel ≥ 5.3; the kernel loads the client's module if it can). An
// error means the kernel cannot say: too old, or no such client.
func ClientChardev(client string) (Chardev, error) {
	b := NewBuilder(nil)
	b.String(uapi.RDMA_NLDEV_ATTR_CHARDEV_TYPE, client)
	msgs, err := rdmaDo(uapi.RDMA_NLDEV_CMD_GET_CHARDEV, 0, b.Bytes())
	if err != nil {
		return Chardev{}, fmt.Errorf("rdma chardev %s: %w", client, err)
	}
	var c Chardev
	for _, m := range msgs {
		parseChardev(&c, m.Payload)
	}
	return c, nil
}
