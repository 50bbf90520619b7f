//go:build amd64 || 386 || arm64 || ppc64 || ppc64le || riscv64 || loong64 || mips64 || mips64le

package mlx5

import "unsafe"

// archRefusal is nil: this GOARCH has its barriers in mmio_$GOARCH.s.
var archRefusal error

// mmioStore64 stores v to the UAR at p in one 8-byte write; the bytes go in
// host memory order, so the caller builds v from the big-endian bytes.
//
//go:noescape
func mmioStore64(p unsafe.Pointer, v uint64)

// dmaFence orders the CPU's stores to DMA memory (WQEs) before a later
// store the device reads (the doorbell record).
func dmaFence()

// wcFence orders ordinary stores before a UAR store, and flushes it.
func wcFence()
