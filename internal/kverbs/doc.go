// Package kverbs holds goverbs' kernel verbs: one typed function per
// uverbs command (get context, alloc pd, reg mr, create cq, req notify,
// create qp, …), each choosing between the native ioctl method and the
// legacy write command the way rdma-core does, and turning the kernel's
// structs into Go values. It sits on internal/transport, below the
// providers (which need CQ and QP creation with their driver data) and
// uverbs (which wraps them for users).
//
// Functions return the bare errno (or transport errors); callers wrap
// them into *uverbs.OpError with the verb's name.
package kverbs
