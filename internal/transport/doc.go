// Package transport is the only code in goverbs that issues uverbs
// commands to the kernel. It frames both kinds the kernel takes on
// /dev/infiniband/uverbsN:
//
//   - RDMA_VERBS_IOCTL: a header and attributes ([Cmd] builds them:
//     PTR_IN, inline when it fits in 8 bytes; PTR_OUT; IDR and FD, NEW
//     ones written back by the kernel; CONST; FLAGS; UHW_IN and UHW_OUT),
//     with the driver_id of the device on every call;
//   - the legacy write commands, plain and extended, sent through the
//     ioctl method UVERBS_METHOD_INVOKE_WRITE (kernel ≥ 5.0) or, where a
//     kernel lacks it, through write(2).
//
// A [Cmd] owns all the memory the kernel reads and writes during a call:
// the header, the attributes, and an arena for payloads, so no address of
// a Go stack object ever reaches the kernel, and a reused Cmd makes a call
// without allocating. Which methods the kernel supports is probed once per
// [Conn] and cached.
package transport
