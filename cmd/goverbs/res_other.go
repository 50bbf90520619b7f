//go:build !linux

package main

import "io"

// resTo checks the arguments, then fails: RDMA netlink exists on Linux
// only.
func resTo(stdout, stderr io.Writer, args []string) int {
	if _, err := parseRes(args); err != nil {
		return resUsageError(stderr, err)
	}
	return unsupportedTo(stderr, "res")
}
