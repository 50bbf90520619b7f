package rdmatest

import (
	"testing"

	"github.com/goverbs/goverbs/internal/netlink"
)

// RXECounts returns the kernel's resource counts of rxe0 (RDMA netlink
// RES_GET, what "rdma resource show" prints): the baseline that a test
// which opens and closes everything compares with.
func RXECounts(tb testing.TB) map[string]uint64 {
	tb.Helper()
	all, err := netlink.RDMAResourceSummary()
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range all {
		if r.Device == "rxe0" {
			return r.Counts
		}
	}
	tb.Fatalf("rdma resource show lists no rxe0: %+v", all)
	return nil
}
