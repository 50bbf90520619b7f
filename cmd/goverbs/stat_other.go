//go:build !linux

package main

import "io"

// statTo checks the arguments, then fails: RDMA netlink exists on Linux
// only.
func statTo(stdout, stderr io.Writer, args []string) int {
	if _, err := parseStat(args); err != nil {
		return statUsageError(stderr, err)
	}
	return unsupportedTo(stderr, "stat")
}
