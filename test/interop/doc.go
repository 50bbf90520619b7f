// Package interop proves on the wire that goverbs talks to the C world:
// goverbs' pingpong against rdma-core's ibv_rc_pingpong, each as server
// and as client, polling and event-driven, at several sizes. The tests run
// in the VM harness, where /bin/goverbs and rdma-core's ibverbs-utils are
// installed; outside it they skip.
package interop
