//go:build !linux

package main

import "io"

// linkTo checks the arguments, then fails: RDMA links exist on Linux only.
func linkTo(stdout, stderr io.Writer, args []string) int {
	if _, err := parseLink(args); err != nil {
		return linkUsageError(stderr, err)
	}
	return unsupportedTo(stderr, "link")
}
