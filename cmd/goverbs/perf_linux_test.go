package main

import (
	"testing"

	"github.com/goverbs/goverbs/uapi"
)

// TestDefaultInline holds -I's default to perftest's: inline only on the
// devices perftest recognises (of goverbs' drivers, mlx5), and then only
// for the latency tests.
func TestDefaultInline(t *testing.T) {
	for _, tc := range []struct {
		driver uint32
		test   string
		want   int
	}{
		{uapi.RDMA_DRIVER_MLX5, "send_lat", 236},
		{uapi.RDMA_DRIVER_MLX5, "write_lat", 220},
		{uapi.RDMA_DRIVER_MLX5, "send_bw", 0},
		{uapi.RDMA_DRIVER_MLX5, "write_bw", 0},
		{uapi.RDMA_DRIVER_RXE, "send_lat", 0},
		{uapi.RDMA_DRIVER_RXE, "write_lat", 0},
		{uapi.RDMA_DRIVER_UNKNOWN, "send_lat", 0},
	} {
		if got := defaultInline(tc.driver, tc.test); got != tc.want {
			t.Errorf("driver %d, %s: %d bytes inline, want %d", tc.driver, tc.test, got, tc.want)
		}
	}
}
