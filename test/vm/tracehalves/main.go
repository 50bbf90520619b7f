// Command tracehalves reads the scheduler traces that the VM harness's
// -benchtrace writes (tracefs text, gzipped) of a latency pair's client
// step, and tells where each half round trip's time went. A half is the
// time from one side's post (its doorbell, the rxe work item it queues)
// to the other side's next post: the kernel's work for the message, the
// wait for a CPU, and the other side's poll and post.
//
// Each half falls in one of four classes, by what the scheduler did:
//
//	local    one context switch: a kernel worker took the poster's CPU and
//	         did all the work there, while the other side polled on its own
//	remote   one or two switches, the work done on the other side's CPU
//	handoff  fewer than three switches, one from a worker to another
//	multi    three or more: workers woken across the CPUs
//
// For each trace it prints a row: the halves' count, median and mean, and
// each class's share and median (µs). Under it, for the local halves that
// ran two work items and woke no other worker, the same path every time,
// the median and mean of each stretch: the post to the switch, the switch to the
// first work item, the first to the second item's queueing, that to its
// start, and its start to the other side's post. Those are kernel code and
// one side's poll; they compare two tools' runs stretch by stretch.
//
//	go run ./test/vm/tracehalves DIR/trace-send_lat-*.txt.gz
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tracehalves TRACE.txt.gz...")
		os.Exit(2)
	}
	rc := 0
	for _, p := range os.Args[1:] {
		evs, err := readTrace(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tracehalves:", err)
			rc = 1
			continue
		}
		s, err := analyze(evs)
		if err != nil {
			fmt.Fprintf(os.Stderr, "tracehalves: %s: %v\n", p, err)
			rc = 1
			continue
		}
		fmt.Print(s.format(p))
	}
	os.Exit(rc)
}
