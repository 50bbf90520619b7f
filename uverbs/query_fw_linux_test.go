package uverbs

import (
	"testing"

	"github.com/goverbs/goverbs/uapi"
)

// The firmware version is the provider's to format, as in rdma-core,
// where each provider's query_device writes fw_ver: mlx5 pads the
// sub-minor to four digits, rxe and the rest do not.
func TestFWVersionByProvider(t *testing.T) {
	const v = 16<<32 | 35<<16 | 100
	for _, c := range []struct {
		name   string
		driver uint32
		want   string
	}{
		{"mlx5", uapi.RDMA_DRIVER_MLX5, "16.35.0100"},
		{"rxe", uapi.RDMA_DRIVER_RXE, "16.35.100"},
		{"no provider", uapi.RDMA_DRIVER_EFA, "16.35.100"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := fwVersion(v, c.driver); got != c.want {
				t.Errorf("fwVersion(%#x) = %q, want %q", uint64(v), got, c.want)
			}
		})
	}
}
