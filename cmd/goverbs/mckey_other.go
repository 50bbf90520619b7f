//go:build !linux

package main

import "os"

// mckey exists everywhere, so that the tool lists the same commands on
// every system; off Linux it fails with one line.
func init() {
	register("mckey", mckeySummary, func([]string) int {
		return unsupportedTo(os.Stderr, "mckey")
	})
}
