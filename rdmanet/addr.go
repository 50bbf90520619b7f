package rdmanet

import "net/netip"

// network is the name of rdmanet's network, in addresses and errors.
const network = "rdma"

// Addr is the address of an rdmanet endpoint: the IP address of an RDMA
// device's netdev and a port of the RDMA CM's TCP port space.
type Addr struct{ netip.AddrPort }

// Network returns "rdma".
func (Addr) Network() string { return network }
