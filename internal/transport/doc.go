// Package transport is the only code in goverbs that issues uverbs
// commands to the kernel: the RDMA_VERBS_IOCTL attribute framing and,
// later, the legacy write commands and their INVOKE_WRITE wrapping.
//
// This first cut carries the ioctl header and attribute layouts and one
// call, [Invoke]; the full builder (PTR_IN inlining, IDR/FD write-back,
// UHW, method probing) arrives with the uverbs control path.
package transport
