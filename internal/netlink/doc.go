// Package netlink is goverbs' small netlink client: just enough of
// rtnetlink to create and address the netdevs that soft-RoCE runs on, and
// of RDMA netlink (NETLINK_RDMA, client RDMA_NL_NLDEV) to add, delete and
// list RDMA links, which is what iproute2's "rdma link" sends, and to
// read what "rdma resource" and "rdma statistic" show: the objects the
// kernel tracks and the ports' hardware counters.
//
// The VM harness's /init uses it to bring up rxe0, the goverbs tool's
// "link", "res" and "stat" subcommands reuse it, and uverbs reads port
// counters through it. It is built on golang.org/x/sys/unix only.
//
// A [Conn] is not safe for concurrent use; the package-level helpers each
// open and close their own.
package netlink
