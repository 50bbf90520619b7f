package uapi

// The ABI of rxe's ATOMIC_WRITE and FLUSH, which Linux 6.2 added:
// c2d939002934 ("RDMA/rxe: Extend rxe user ABI to support atomic
// write") and 124011e6e933 ("RDMA/rxe: Enable RDMA FLUSH capability for
// rxe device"), synced into rdma-core by d77c0504c and 16ac905b1.
//
// They are written by hand, not generated: genuapi reads the pinned
// linux-libc-dev 6.1, the oldest kernel goverbs runs on, whose headers
// lack them, and a newer pin would need Debian's backports archive on
// every machine that runs make generate. The names and values are the
// kernel's; TestKernel62 checks each against its neighbours in the
// generated files. Once the pin moves to a 6.2 or later header package,
// the generated files declare these names too, and the build fails
// until this file goes.
const (
	// enum ib_uverbs_device_cap_flags (ib_user_ioctl_verbs.h).
	IB_UVERBS_DEVICE_FLUSH_GLOBAL     = 0x4000000000  // 1 << 38
	IB_UVERBS_DEVICE_FLUSH_PERSISTENT = 0x8000000000  // 1 << 39
	IB_UVERBS_DEVICE_ATOMIC_WRITE     = 0x10000000000 // 1 << 40

	// enum ib_uverbs_access_flags (ib_user_ioctl_verbs.h).
	IB_UVERBS_ACCESS_FLUSH_GLOBAL     = 0x100 // 1 << 8
	IB_UVERBS_ACCESS_FLUSH_PERSISTENT = 0x200 // 1 << 9

	// enum ib_uverbs_wc_opcode (ib_user_verbs.h).
	IB_UVERBS_WC_FLUSH        = 8
	IB_UVERBS_WC_ATOMIC_WRITE = 9

	// enum ib_uverbs_wr_opcode (ib_user_verbs.h).
	IB_UVERBS_WR_FLUSH        = 14
	IB_UVERBS_WR_ATOMIC_WRITE = 15

	// enum ib_placement_type and enum ib_selectivity_level
	// (ib_user_verbs.h): what a flush makes of the data, and how much of
	// the region it covers.
	IB_FLUSH_GLOBAL     = 0x1
	IB_FLUSH_PERSISTENT = 0x2
	IB_FLUSH_RANGE      = 0x0
	IB_FLUSH_MR         = 0x1

	// struct rxe_send_wr's wr.flush (rdma_user_rxe.h), which 6.2 added to
	// the union: {remote_addr u64, length u32, rkey u32, type u8, level u8}.
	OffsetRxeSendWqeFlushRemoteAddr = OffsetRxeSendWqeWRUnion + 0  // offsetof(struct rxe_send_wqe, wr.wr.flush.remote_addr)
	OffsetRxeSendWqeFlushLength     = OffsetRxeSendWqeWRUnion + 8  // offsetof(struct rxe_send_wqe, wr.wr.flush.length)
	OffsetRxeSendWqeFlushRKey       = OffsetRxeSendWqeWRUnion + 12 // offsetof(struct rxe_send_wqe, wr.wr.flush.rkey)
	OffsetRxeSendWqeFlushType       = OffsetRxeSendWqeWRUnion + 16 // offsetof(struct rxe_send_wqe, wr.wr.flush.type)
	OffsetRxeSendWqeFlushLevel      = OffsetRxeSendWqeWRUnion + 17 // offsetof(struct rxe_send_wqe, wr.wr.flush.level)

	// struct rxe_dma_info's atomic_wr, which 6.2 added to the union of
	// its flexible arrays: an ATOMIC_WRITE's 8 bytes, where inline data
	// and SGEs also go.
	OffsetRxeSendWqeDmaAtomicWR = OffsetRxeSendWqeDmaInlineData // offsetof(struct rxe_send_wqe, dma.atomic_wr)
)
