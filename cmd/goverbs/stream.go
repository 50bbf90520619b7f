package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// stream's command line and report, kept free of the verbs so that they
// are tested on every system.

// streamSummary is the command's line in goverbs' usage.
const streamSummary = "rdmanet stream latency and throughput, as rdma-core's rstream measures rsockets"

const streamPort = 7471 // rstream's default port

type streamConfig struct {
	server string // -s: the server's address (the client side)
	bind   string // -b: the address to listen on (the server side)
	port   int
	tcp    bool // -T s: Go's TCP sockets instead of rdmanet, as rstream's -T s
	// A custom run (-S, -C or -I given): one test of iters rounds of
	// count transfers of size bytes each way. Otherwise the standard
	// sizes, latency then bandwidth.
	custom             bool
	size, count, iters int
	all                bool // -S all: every size of the table
	busyPoll           time.Duration
}

// streamSizes are rstream's transfer sizes: those it runs by default
// (true), and the rest that -S all adds.
var streamSizes = []struct {
	size int
	std  bool
}{
	{64, true}, {128, false}, {192, false}, {256, false}, {384, false}, {512, false}, {768, false},
	{1 << 10, false}, {3 << 9, false}, {2 << 10, false}, {3 << 10, false}, {4 << 10, true}, {6 << 10, false},
	{8 << 10, false}, {12 << 10, false}, {16 << 10, false}, {24 << 10, false}, {32 << 10, false}, {48 << 10, false},
	{64 << 10, true}, {96 << 10, false}, {128 << 10, false}, {192 << 10, false}, {256 << 10, false},
	{384 << 10, false}, {512 << 10, false}, {768 << 10, false}, {1 << 20, true}, {3 << 19, false},
	{2 << 20, false}, {3 << 20, false}, {4 << 20, false}, {6 << 20, false},
}

// streamFlags parses stream's command line, rstream's flags: -s server or
// -b bind, -p port, -S size (or all), -C count, -I iterations, -T s.
func streamFlags(stderr io.Writer, args []string) (*streamConfig, bool) {
	fs := flag.NewFlagSet("stream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &streamConfig{size: 1000, count: 1000, iters: 1}
	var size, mode string
	fs.StringVar(&c.server, "s", "", "the server's `address` (the client side)")
	fs.StringVar(&c.bind, "b", "", "the `address` to listen on (the server side; default all IPv4 addresses)")
	fs.IntVar(&c.port, "p", streamPort, "the server's `port`")
	fs.StringVar(&size, "S", "", "transfer `size` in bytes (k, m suffixes), or all: every size of rstream's table")
	fs.IntVar(&c.count, "C", c.count, "transfers each way in a round (`count`)")
	fs.IntVar(&c.iters, "I", c.iters, "rounds (`iterations`)")
	fs.StringVar(&mode, "T", "", "s: Go's TCP sockets instead of rdmanet (rstream's -T s); b: blocking (always so here)")
	fs.DurationVar(&c.busyPoll, "busypoll", 0, "poll the completion queue this long before a wait parks (rdmanet.Config.BusyPoll)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: goverbs stream [-b addr] [-p port] [flags]   (server: serves one client's run)")
		fmt.Fprintln(fs.Output(), "       goverbs stream -s addr [-p port] [flags]    (client)")
		fmt.Fprintln(fs.Output(), "ping-pongs and bursts over an rdmanet connection, reported as rdma-core's rstream reports rsockets; give both sides the same -S, -C and -I")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, false
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.custom = set["C"] || set["I"] || (set["S"] && size != "all")
	c.all = size == "all"
	if set["S"] && !c.all {
		n, err := parseSize(size)
		if err != nil {
			fmt.Fprintf(stderr, "goverbs: stream: -S %s: %v\n", size, err)
			return nil, false
		}
		c.size = n
	}
	for _, m := range mode {
		switch m {
		case 's':
			c.tcp = true
		case 'b', 'n':
		default:
			fmt.Fprintf(stderr, "goverbs: stream: -T %c: not a mode this stream knows (s, b)\n", m)
			return nil, false
		}
	}
	switch {
	case fs.NArg() != 0, c.server != "" && c.bind != "":
		fs.Usage()
		return nil, false
	case c.size < 1 || c.count < 1 || c.iters < 1:
		fmt.Fprintf(stderr, "goverbs: stream: size %d, count %d, iterations %d: each must be at least 1\n", c.size, c.count, c.iters)
		return nil, false
	case c.port < 1 || c.port > 65535:
		fmt.Fprintf(stderr, "goverbs: stream: invalid port %d\n", c.port)
		return nil, false
	}
	return c, true
}

// parseSize reads a byte count with an optional k, m or g suffix
// (1024-based).
func parseSize(s string) (int, error) {
	mul := 1
	switch {
	case strings.HasSuffix(s, "k"):
		mul, s = 1<<10, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mul, s = 1<<20, strings.TrimSuffix(s, "m")
	case strings.HasSuffix(s, "g"):
		mul, s = 1<<30, strings.TrimSuffix(s, "g")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > (1<<31-1)/mul {
		return 0, fmt.Errorf("not a size")
	}
	return n * mul, nil
}

// streamTest is one test: its name ("64_lat", "4k_bw", "custom"), and
// iters rounds of count transfers of size bytes, first client to server,
// then back.
type streamTest struct {
	name               string
	size, count, iters int
}

// streamTests returns the tests of c's run: one connection's worth for
// latency (count 1), then one for bandwidth (iterations 1), as rstream
// runs them, or the one custom test.
func streamTests(c *streamConfig) (lat, bw []streamTest) {
	if c.custom {
		return []streamTest{{"custom", c.size, c.count, c.iters}}, nil
	}
	for _, s := range streamSizes {
		if !s.std && !c.all {
			continue
		}
		n := sizeToCount(s.size)
		lat = append(lat, streamTest{sizeStr(int64(s.size)) + "_lat", s.size, 1, n})
		bw = append(bw, streamTest{sizeStr(int64(s.size)) + "_bw", s.size, n, 1})
	}
	return lat, bw
}

// sizeToCount is how many transfers of size a standard test makes.
func sizeToCount(size int) int {
	switch {
	case size >= 1<<20:
		return 100
	case size >= 1<<16:
		return 1000
	case size >= 1<<10:
		return 10000
	}
	return 100000
}

// sizeStr writes a byte count in binary units, with one decimal below
// 10 of the unit ("64", "1.5k", "4k", "1m"), as rstream does.
func sizeStr(n int64) string {
	base, mag := int64(1), ""
	switch {
	case n >= 1<<30:
		base, mag = 1<<30, "g"
	case n >= 1<<20:
		base, mag = 1<<20, "m"
	case n >= 1<<10:
		base, mag = 1<<10, "k"
	}
	if n/base < 10 {
		if frac := n % base * 10 / base; frac != 0 {
			return fmt.Sprintf("%d.%d%s", n/base, frac, mag)
		}
	}
	return fmt.Sprintf("%d%s", n/base, mag)
}

// cntStr writes a count in decimal units, truncated ("100k", "1m").
func cntStr(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%db", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%dm", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return strconv.FormatInt(n, 10)
}

// streamHeader and streamRow print rstream's table: the bytes of both
// directions, Gb/s over them, and µs per one-way transfer.
func streamHeader(w io.Writer) {
	fmt.Fprintf(w, "%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n", "name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer")
}

func streamRow(w io.Writer, t streamTest, took time.Duration) {
	total := int64(t.iters) * int64(t.count) * int64(t.size) * 2
	usec := float64(took) / float64(time.Microsecond)
	fmt.Fprintf(w, "%-10s%-8s%-8s%-8s%-8s%8.2fs%10.2f%11.2f\n", t.name, sizeStr(int64(t.size)), cntStr(int64(t.count)),
		cntStr(int64(t.iters)), sizeStr(total), took.Seconds(), float64(total)*8/(usec*1000), usec/float64(t.iters*t.count*2))
}
