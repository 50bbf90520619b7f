package main

import (
	"flag"
	"fmt"
	"io"
)

// mckeySummary is the command's line in goverbs' usage.
const mckeySummary = "multicast sender or receiver over the RDMA connection manager, as rdma-core's mckey"

type mckeyConfig struct {
	group    string
	bind     string
	sender   bool
	sendOnly bool
	count    int
	size     int
}

// mckeyFlags parses mckey's command line: -m group, -b bind address, -s,
// -o, -C count, -S size (the boolean letters may be grouped, "-so").
// rdma-core's -c (several joins), -p (the IPoIB port space), -M (an
// unmapped AF_IB group) and -l (no multicast loopback) are not taken.
func mckeyFlags(stderr io.Writer, args []string) (*mckeyConfig, bool) {
	fs := flag.NewFlagSet("mckey", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &mckeyConfig{}
	fs.StringVar(&c.group, "m", "", "multicast `address` to join")
	fs.StringVar(&c.bind, "b", "", "local `address` on the RDMA device's netdev")
	fs.BoolVar(&c.sender, "s", false, "send (default: receive)")
	fs.BoolVar(&c.sendOnly, "o", false, "join as a send-only full member")
	fs.IntVar(&c.count, "C", 10, "message `count`")
	fs.IntVar(&c.size, "S", 100, "message `size`")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: goverbs mckey -m group -b address [-s] [-o] [-C count] [-S size]")
		fmt.Fprintln(fs.Output(), "interoperates with rdma-core's mckey, either side")
		fs.PrintDefaults()
	}
	if err := fs.Parse(splitBoolFlags(args, "so")); err != nil {
		return nil, false
	}
	switch {
	case fs.NArg() != 0, c.group == "", c.bind == "":
		fs.Usage()
		return nil, false
	case c.count < 0:
		fmt.Fprintf(stderr, "goverbs: mckey: invalid count %d\n", c.count)
		return nil, false
	case c.size < 0 || c.size > 4096:
		fmt.Fprintf(stderr, "goverbs: mckey: invalid size %d (at most 4096, the largest MTU)\n", c.size)
		return nil, false
	case c.sendOnly && !c.sender:
		fmt.Fprintln(stderr, "goverbs: mckey: -o (send-only) with no -s: a send-only member receives nothing")
		return nil, false
	}
	return c, true
}
