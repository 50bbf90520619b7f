//go:build !linux

package main

import (
	"io"
	"os"
	"runtime"
)

// pingpong and perf exist everywhere, so that the tool lists the same
// commands on every system; off Linux they fail with one line.
func init() {
	register("pingpong", "RC or UD ping-pong, wire-compatible with ibv_rc_pingpong and ibv_ud_pingpong", func([]string) int {
		return unsupportedTo(os.Stderr, "pingpong")
	})
	register("perf", "send/write latency and bandwidth, reporting what perftest's ib_{send,write}_{lat,bw} report", func([]string) int {
		return unsupportedTo(os.Stderr, "perf")
	})
}

// unsupportedTo fails cmd: "goverbs: perf: RDMA verbs are not supported
// on darwin".
func unsupportedTo(stderr io.Writer, cmd string) int {
	return failTo(stderr, "%s: RDMA verbs are not supported on %s", cmd, runtime.GOOS)
}
