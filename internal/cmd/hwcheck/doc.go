// Command hwcheck is the mlx5 hardware checklist that make hwtest runs
// on a machine with a ConnectX: in order, one line each, the device
// opened with dynamic UARs and then with static ones forced, the
// cqe_version the kernel reports, a CQ's create, poll, arm and event, a
// resize across the ring's wrap, a QP reset that cleans its CQEs, arm
// sequence numbers over 1,000 events, RC and UD ping-pong against
// rdma-core's ibv_rc_pingpong and ibv_ud_pingpong (where installed), the
// conformance suite, and uverbs' memory-window tests (binds and
// invalidations are UMR WQEs on mlx5); then a summary to paste into an
// issue.
//
// With -model every step runs against internal/mlx5model instead, in
// this process (make model), so that the steps are known to run where no
// ConnectX is; the rdma-core half of the ping-pong then runs as goverbs
// against goverbs, since rdma-core cannot reach an in-process device.
//
//	go run ./internal/cmd/hwcheck                 # every mlx5 device here, or NOT RUN
//	go run ./internal/cmd/hwcheck -dev mlx5_1 -gid 3
//	go run ./internal/cmd/hwcheck -model
package main
