// Package rdmatest builds the RDMA fixtures goverbs' device tests share:
// an opened device, queue pairs connected in loopback, polling with a
// deadline. Linux only.
//
// The device is rxe0 by default; tests outside the VM then skip
// (testutil.RequireDevice). With GOVERBS_TEST_DEVICE=mlx5model they run on
// the in-process mlx5 device model instead (internal/mlx5model), through
// goverbs' mlx5 provider, on any host: each test gets a fresh model
// device, and the model's violations fail the test. GOVERBS_MLX5MODEL
// picks the model's options, comma-separated: static (a kernel without
// dynamic UARs), refusedyn (one that refuses them with EINVAL), cqe0
// (cqe_version 0), armpending (an arm fires at once on CQEs not yet
// polled), realtime (the device's clock in real-time mode). Tests that pin one provider's behaviour ask Provider or
// SkipUnless.
package rdmatest
