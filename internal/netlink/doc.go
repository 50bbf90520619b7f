// Package netlink is goverbs' small netlink client: just enough of
// rtnetlink to create and address the netdevs that soft-RoCE runs on, and
// of RDMA netlink (NETLINK_RDMA, client RDMA_NL_NLDEV) to add, delete and
// list RDMA links, which is what iproute2's "rdma link" sends.
//
// The VM harness's /init uses it to bring up rxe0, and the goverbs tool's
// "link" subcommands reuse it. It is built on golang.org/x/sys/unix only.
//
// A [Conn] is not safe for concurrent use; the package-level helpers each
// open and close their own.
package netlink
