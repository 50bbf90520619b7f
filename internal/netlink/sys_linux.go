package netlink

import (
	"fmt"

	"github.com/goverbs/goverbs/uapi"
)

// RDMASystem is what RDMA_NLDEV_CMD_SYS_GET reports about the RDMA
// subsystem as a whole ("rdma system show").
type RDMASystem struct {
	// NetNSShared says whether RDMA devices are visible in every network
	// namespace (the default) rather than only in their own.
	NetNSShared bool
	// CopyOnFork says whether the kernel copies pinned pages into a
	// forked child at fork time, so that the parent keeps the pages its
	// registrations use. Kernels report it from 5.13; an older one, which
	// omits the attribute, reads as false. libibverbs'
	// ibv_is_fork_initialized answers IBV_FORK_UNNEEDED when it is set.
	CopyOnFork bool
}

// QueryRDMASystem asks the kernel for the RDMA subsystem's settings.
func QueryRDMASystem() (RDMASystem, error) {
	msgs, err := rdmaDo(uapi.RDMA_NLDEV_CMD_SYS_GET, 0, nil)
	if err != nil {
		return RDMASystem{}, fmt.Errorf("rdma system show: %w", err)
	}
	var s RDMASystem
	for _, m := range msgs {
		for _, a := range ParseAttrs(m.Payload) {
			switch a.Type {
			case uapi.RDMA_NLDEV_SYS_ATTR_NETNS_MODE:
				s.NetNSShared = a.Uint8() != 0
			case uapi.RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK:
				s.CopyOnFork = a.Uint8() != 0
			}
		}
	}
	return s, nil
}
