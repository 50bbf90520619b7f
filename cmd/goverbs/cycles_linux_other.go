//go:build linux && !amd64 && !arm64

package main

import "time"

var cyclesBase = time.Now()

// cycles reads the monotonic clock in nanoseconds, where goverbs has no
// reading of the CPU's counter.
func cycles() uint64 { return uint64(time.Since(cyclesBase)) }
