// Command goverbs is the goverbs tool: one static binary (CGO_ENABLED=0)
// for RDMA work from a shell.
//
// Usage:
//
//	goverbs devices                       list RDMA devices (ibv_devices)
//	goverbs devinfo [-d DEV] [-i PORT] [-v]   device and port details (ibv_devinfo)
//	goverbs link add NAME type rxe netdev IF  create a soft-RoCE device (rdma link add)
//	goverbs link del NAME                 delete one
//	goverbs link show                     list RDMA links
//	goverbs res [show] [qp|cm_id|cq|mr|pd|ctx] [FILTER VALUE]...   objects the kernel tracks (rdma resource show)
//	goverbs stat [show] [link DEV[/PORT]]  ports' hardware counters (rdma statistic show)
//	goverbs pingpong [flags] [server]     RC or UD ping-pong, wire-compatible with ibv_rc_pingpong and ibv_ud_pingpong
//	goverbs perf [-t TEST] [flags] [server]   latency and bandwidth, as perftest's ib_{send,write}_{lat,bw}
//	goverbs rping -s|-c [-vVd] [-a ADDR] [-p PORT] [-C N] [-S SIZE]   RDMA READ/WRITE ping by IP address, wire-compatible with rping
//	goverbs cmtime [-s SERVER | -b ADDR] [-c N] [-p PORT]   time connection setup and teardown, as rdma-core's cmtime
//	goverbs stream [-s SERVER | -b ADDR] [-p PORT] [-S SIZE] [-C N] [-I N] [-T s]   rdmanet latency and throughput, as rstream
//
// pingpong and perf change no thread's CPUs or priority: like perftest,
// they leave placement to the user (taskset). -cpu N pins the polling
// thread, and that one alone, to CPU N. They poll on one goroutine and
// give the Go scheduler one P, as perftest runs one thread, unless
// GOMAXPROCS is set.
//
// Errors are one line naming what failed and why, with a hint when a
// device, module or permission is missing; the exit status is 1 on
// failure and 2 on a usage error, as rdma-core's tools do.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand: it gets its arguments (without its name)
// and returns the exit status.
type command struct {
	run     func(args []string) int
	summary string
}

var commands = map[string]command{}

func register(name, summary string, run func([]string) int) {
	commands[name] = command{run: run, summary: summary}
}

// registerInterruptible registers a command that runs until its work is
// done or the process is interrupted (SIGINT or SIGTERM), which ends its
// context.
func registerInterruptible(name, summary string, run func(ctx context.Context, stdout, stderr io.Writer, args []string) int) {
	register(name, summary, func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return run(ctx, os.Stdout, os.Stderr, args)
	})
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: goverbs COMMAND [ARGS]")
	fmt.Fprintln(os.Stderr, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "-h" || name == "-help" || name == "--help" || name == "help" {
		usage()
		os.Exit(0)
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "goverbs: unknown command %q\n", name)
		usage()
		os.Exit(2)
	}
	os.Exit(c.run(os.Args[2:]))
}

// fail prints one error line, with a hint for the usual causes, and
// returns exit status 1.
func fail(format string, args ...any) int { return failTo(os.Stderr, format, args...) }
