//go:build !linux

package main

import "os"

// rping exists everywhere, so that the tool lists the same commands on
// every system; off Linux it fails with one line.
func init() {
	register("rping", rpingSummary, func([]string) int {
		return unsupportedTo(os.Stderr, "rping")
	})
}
