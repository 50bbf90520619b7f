//go:build !linux

package main

import "io"

// devinfoTo checks the flags, then fails: RDMA devices exist on Linux only.
func devinfoTo(stdout, stderr io.Writer, args []string) int {
	if _, status, ok := parseDevinfo(stderr, args); !ok {
		return status
	}
	return unsupportedTo(stderr, "devinfo")
}
