package uapi

import "testing"

// TestKernel62 checks the hand-written constants of kernel62.go: each
// value as Linux 6.2's headers have it (c2d939002934, 124011e6e933), and
// where each sits beside the names genuapi made from 6.1's headers, so a
// slip in either shows.
func TestKernel62(t *testing.T) {
	var wqe RxeSendWqe
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"IB_UVERBS_DEVICE_FLUSH_GLOBAL", IB_UVERBS_DEVICE_FLUSH_GLOBAL, 1 << 38},
		{"IB_UVERBS_DEVICE_FLUSH_PERSISTENT", IB_UVERBS_DEVICE_FLUSH_PERSISTENT, 1 << 39},
		{"IB_UVERBS_DEVICE_ATOMIC_WRITE", IB_UVERBS_DEVICE_ATOMIC_WRITE, 1 << 40},
		// 6.2 skips bit 37, which old kernels may set.
		{"IB_UVERBS_DEVICE_FLUSH_GLOBAL after PCI_WRITE_END_PADDING", IB_UVERBS_DEVICE_FLUSH_GLOBAL, IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING << 2},
		{"IB_UVERBS_ACCESS_FLUSH_GLOBAL after HUGETLB", IB_UVERBS_ACCESS_FLUSH_GLOBAL, IB_UVERBS_ACCESS_HUGETLB << 1},
		{"IB_UVERBS_ACCESS_FLUSH_PERSISTENT", IB_UVERBS_ACCESS_FLUSH_PERSISTENT, IB_UVERBS_ACCESS_FLUSH_GLOBAL << 1},
		{"IB_UVERBS_WC_FLUSH after TSO", IB_UVERBS_WC_FLUSH, IB_UVERBS_WC_TSO + 1},
		{"IB_UVERBS_WC_ATOMIC_WRITE", IB_UVERBS_WC_ATOMIC_WRITE, 9},
		{"IB_UVERBS_WR_FLUSH after MASKED_ATOMIC_FETCH_AND_ADD", IB_UVERBS_WR_FLUSH, IB_UVERBS_WR_MASKED_ATOMIC_FETCH_AND_ADD + 1},
		{"IB_UVERBS_WR_ATOMIC_WRITE", IB_UVERBS_WR_ATOMIC_WRITE, 15},
		{"IB_FLUSH_GLOBAL", IB_FLUSH_GLOBAL, 1},
		{"IB_FLUSH_PERSISTENT", IB_FLUSH_PERSISTENT, 2},
		{"IB_FLUSH_RANGE", IB_FLUSH_RANGE, 0},
		{"IB_FLUSH_MR", IB_FLUSH_MR, 1},
		// wr.flush starts the union, as wr.rdma does: its address is where
		// the kernel reads any request's remote address.
		{"wr.flush.remote_addr", OffsetRxeSendWqeFlushRemoteAddr, OffsetRxeSendWqeRDMARemoteAddr},
		{"wr.flush.rkey", OffsetRxeSendWqeFlushRKey, OffsetRxeSendWqeFlushLength + 4},
		{"dma.atomic_wr", OffsetRxeSendWqeDmaAtomicWR, OffsetRxeSendWqeDmaSGE},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if end := OffsetRxeSendWqeFlushLevel + 1 - OffsetRxeSendWqeWRUnion; end > len(wqe.WR.WR) {
		t.Errorf("wr.flush ends at %d bytes into a union of %d", end, len(wqe.WR.WR))
	}
}
