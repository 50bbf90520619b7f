// Package rdmatest builds the RDMA fixtures goverbs' device tests share:
// an opened rxe0, queue pairs connected in loopback, polling with a
// deadline. Tests outside the VM skip (testutil.RequireDevice). Linux only.
package rdmatest
