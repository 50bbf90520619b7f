// Package netfault tests RDMA between two hosts over a link that
// misbehaves. Its tests run in the VM harness's two-host guest (go run
// ./test/vm -twohost): rxe0 on veth0 (192.0.2.1) and rxe1 on veth1
// (192.0.2.2), the traffic between them routed across the veth pair, and
// netem on a veth end to drop, duplicate, reorder, corrupt and delay its
// packets. Elsewhere, including the harness's usual one-host guest, they
// skip: the topology is not there.
package netfault
