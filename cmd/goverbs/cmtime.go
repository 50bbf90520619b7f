package main

import (
	"flag"
	"fmt"
	"io"
	"time"
)

// cmtime's command line and report, kept free of the verbs so that they
// are tested on every system.

// cmtimeSummary is the command's line in goverbs' usage.
const cmtimeSummary = "connection setup and teardown timing over the RDMA connection manager, as rdma-core's cmtime"

const (
	cmtimePort  = 7471 // cmtime's default port
	cmtimeConns = 100  // cmtime's default -c
)

type cmtimeConfig struct {
	server string // -s: the server's address (the client side)
	bind   string // -b: the address to listen on (the server side)
	conns  int
	port   int
	prof   string // -cpuprofile: a pprof CPU profile of the run
	// steps: the client drives rdmacm's low level (one EventChannel, an
	// ID each) and times each librdmacm step as cmtime does, not Dial
	// and Close.
	steps bool
}

// cmtimeFlags parses cmtime's command line: -s server or -b bind, -c
// connections, -p port.
func cmtimeFlags(stderr io.Writer, args []string) (*cmtimeConfig, bool) {
	fs := flag.NewFlagSet("cmtime", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &cmtimeConfig{}
	fs.StringVar(&c.server, "s", "", "the server's `address` (the client side)")
	fs.StringVar(&c.bind, "b", "", "the `address` to listen on (the server side; default all IPv4 addresses)")
	fs.IntVar(&c.conns, "c", cmtimeConns, "`connections` to make, all at once (the client side)")
	fs.IntVar(&c.port, "p", cmtimePort, "the server's `port`")
	fs.StringVar(&c.prof, "cpuprofile", "", "write a CPU profile (pprof) of the run to `file`")
	fs.BoolVar(&c.steps, "steps", false, "the client side (a server ignores it): make the connections on rdmacm's low level, one step at a time for all of them, and time each step as cmtime does (create id, resolve addr, resolve route, create qp, connect, disconnect, destroy qp, destroy)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: goverbs cmtime [-b addr] [-p port]                 (server: accept until interrupted)")
		fmt.Fprintln(fs.Output(), "       goverbs cmtime -s addr [-c connections] [-p port]  (client: connect them all, then close them all)")
		fmt.Fprintln(fs.Output(), "times rdmacm.Dial and Conn.Close as rdma-core's cmtime times its steps; either side works with cmtime's")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, false
	}
	switch {
	case fs.NArg() != 0, c.server != "" && c.bind != "":
		fs.Usage()
		return nil, false
	case c.conns < 1:
		fmt.Fprintf(stderr, "goverbs: cmtime: invalid connection count %d\n", c.conns)
		return nil, false
	case c.port < 1 || c.port > 65535:
		fmt.Fprintf(stderr, "goverbs: cmtime: invalid port %d\n", c.port)
		return nil, false
	}
	return c, true
}

// cmtimeStep is one timed step over every connection: the whole step's
// wall time (all connections in flight at once) and each connection's.
type cmtimeStep struct {
	name     string
	total    time.Duration
	min, max time.Duration
}

// add counts one connection's time in the step.
func (s *cmtimeStep) add(d time.Duration) {
	if s.min == 0 || d < s.min {
		s.min = d
	}
	s.max = max(s.max, d)
}

// cmtimeReport prints steps as cmtime prints its own: a header, then per
// step the total and the longest connection's time in ms, the shortest
// in µs, and the total per connection in µs; then the sum of the steps
// per connection, which compares with the sum of cmtime's rows.
func cmtimeReport(w io.Writer, steps []cmtimeStep, conns int) {
	fmt.Fprintln(w, "step              total ms     max ms     min us  us / conn")
	var sum time.Duration
	for _, s := range steps {
		fmt.Fprintf(w, "%-13s: %11.2f%11.2f%11.2f%11.2f\n", s.name, ms(s.total), ms(s.max), us(s.min), us(s.total)/float64(conns))
		sum += s.total
	}
	fmt.Fprintf(w, "%d connections: %.2f us per connection, setup and teardown\n", conns, us(sum)/float64(conns))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
