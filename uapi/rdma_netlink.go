package uapi

// RDMA_NL_GET_TYPE is the netlink message type of operation op of RDMA
// netlink client client (RDMA_NL_NLDEV, …): the macro of that name in
// rdma/rdma_netlink.h, a name computed from two others.
func RDMA_NL_GET_TYPE(client, op uint16) uint16 { return client<<10 + op }
