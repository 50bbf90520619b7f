//go:build race

package testutil

// Race is true in binaries built with the race detector (go test -race,
// make vmrace). Its instrumentation makes some buffers escape to the
// heap (a local passed to unix.Read, say), so allocation counts that are
// 0 in a normal build are not asserted under it.
const Race = true
