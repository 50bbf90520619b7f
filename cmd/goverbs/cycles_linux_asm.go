//go:build linux && (amd64 || arm64)

package main

// cycles reads the CPU's cycle counter as perftest's get_cycles does: the
// time stamp counter (RDTSC) on amd64, the virtual counter (CNTVCT_EL0)
// on arm64. Neither is serializing, as perftest's is not.
func cycles() uint64
