package uapi

import (
	"testing"
	"unsafe"
)

// TestFacts checks a few numbers that goverbs relies on, from
// docs/rdma-facts.md and the kernel, against the generated names.
func TestFacts(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"sizeof(struct ib_uverbs_ioctl_hdr)", uint64(unsafe.Sizeof(IBUverbsIoctlHdr{})), 24},
		{"offsetof(struct ib_uverbs_ioctl_hdr, driver_id)", uint64(unsafe.Offsetof(IBUverbsIoctlHdr{}.DriverID)), 16},
		{"sizeof(struct ib_uverbs_attr)", uint64(unsafe.Sizeof(IBUverbsAttr{})), 16},
		{"offsetof(struct ib_uverbs_attr, data)", uint64(unsafe.Offsetof(IBUverbsAttr{}.Data)), 8},
		{"sizeof(struct ib_uverbs_wc)", uint64(unsafe.Sizeof(IBUverbsWC{})), 48},
		{"sizeof(struct ib_uverbs_cmd_hdr)", uint64(unsafe.Sizeof(IBUverbsCmdHdr{})), 8},
		{"sizeof(struct mminfo)", uint64(unsafe.Sizeof(Mminfo{})), 16},
		{"offsetof(struct rxe_queue_buf, producer_index)", uint64(unsafe.Offsetof(RxeQueueBuf{}.ProducerIndex)), 128},
		{"offsetof(struct rxe_queue_buf, consumer_index)", uint64(unsafe.Offsetof(RxeQueueBuf{}.ConsumerIndex)), 256},
		{"offsetof(struct rxe_queue_buf, data)", uint64(unsafe.Sizeof(RxeQueueBuf{})), 384},
		{"RDMA_VERBS_IOCTL", RDMA_VERBS_IOCTL, 0xc0181b01}, // _IOWR(0x1b, 1, 24 bytes)
		{"UVERBS_OBJECT_CQ", UVERBS_OBJECT_CQ, 3},
		{"UVERBS_METHOD_GET_CONTEXT", UVERBS_METHOD_GET_CONTEXT, 3},
		{"UVERBS_ATTR_F_MANDATORY", UVERBS_ATTR_F_MANDATORY, 1},
		{"UVERBS_ATTR_F_VALID_OUTPUT", UVERBS_ATTR_F_VALID_OUTPUT, 2},
		{"UVERBS_ATTR_UHW_IN", UVERBS_ATTR_UHW_IN, 1 << UVERBS_ID_NS_SHIFT},
		{"RDMA_DRIVER_RXE", RDMA_DRIVER_RXE, 14},
		{"RDMA_DRIVER_MLX5", RDMA_DRIVER_MLX5, 1},
		{"IB_USER_VERBS_ABI_VERSION", IB_USER_VERBS_ABI_VERSION, 6},
		{"IB_USER_VERBS_CMD_REQ_NOTIFY_CQ", IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, 23},
		{"IB_USER_VERBS_CMD_FLAG_EXTENDED", IB_USER_VERBS_CMD_FLAG_EXTENDED, 0x80000000},
		{"RDMA_NL_NLDEV", RDMA_NL_NLDEV, 5},
		{"RDMA_NLDEV_CMD_NEWLINK", RDMA_NLDEV_CMD_NEWLINK, 3},
		{"RDMA_NLDEV_ATTR_NDEV_NAME", RDMA_NLDEV_ATTR_NDEV_NAME, 51},
		{"RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET)", uint64(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET)), 0x1401},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

// TestPointer checks that a Pointer is the address as a __u64 in host byte
// order, as the kernel reads it.
func TestPointer(t *testing.T) {
	var x [8]byte
	p := NewPointer(unsafe.Pointer(&x))
	got := *(*uint64)(unsafe.Pointer(&p))
	if want := uint64(uintptr(unsafe.Pointer(&x))); got != want {
		t.Errorf("NewPointer(%#x) reads as %#x", want, got)
	}
	if got := *(*uint64)(unsafe.Pointer(&Pointer{})); got != 0 {
		t.Errorf("Pointer{} reads as %#x, want 0", got)
	}
}
