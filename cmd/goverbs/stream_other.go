//go:build !linux

package main

import "os"

// stream exists everywhere, so that the tool lists the same commands on
// every system; off Linux it fails with one line.
func init() {
	register("stream", streamSummary, func([]string) int {
		return unsupportedTo(os.Stderr, "stream")
	})
}
