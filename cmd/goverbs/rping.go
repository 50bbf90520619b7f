package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// rping's wire format and ping data, as rdma-core's librdmacm/examples/
// rping.c has them: kept free of the verbs so that they are tested on
// every system.

// rpingSummary is the command's line in goverbs' usage.
const rpingSummary = "RDMA read/write ping over the RDMA connection manager, wire-compatible with rdma-core's rping"

const (
	rpingPort = 7174 // rping's default port
	// rpingInfoLen is sizeof(struct rping_rdma_info): be64 buf, be32
	// rkey, be32 size. Every SEND either side makes is one of these.
	rpingInfoLen = 16
	// rpingMaxSize is RPING_BUFSIZE - 1, the largest -S rping takes.
	rpingMaxSize = 64*1024 - 1
	// rpingMinSize is RPING_MIN_BUFSIZE, sizeof(stringify(INT_MAX)) +
	// sizeof(RPING_MSG_FMT), as Debian's rping 44 computes it: INT_MAX
	// is not defined where rping.c uses it, so it is stringified as
	// "INT_MAX", and the sum is 8 + 15 ("rping -S 1" says "valid range
	// is 23 to 65536").
	rpingMinSize = len("INT_MAX") + 1 + len("rdma-ping-%d: ") + 1
	rpingSize    = 64 // rping's default -S
)

// rpingInfo is struct rping_rdma_info: a buffer the peer may read or
// write, by address, rkey and length.
type rpingInfo struct {
	Addr uint64
	RKey uint32
	Size uint32
}

func (i rpingInfo) marshal(b []byte) {
	binary.BigEndian.PutUint64(b[0:], i.Addr)
	binary.BigEndian.PutUint32(b[8:], i.RKey)
	binary.BigEndian.PutUint32(b[12:], i.Size)
}

func parseRpingInfo(b []byte) (rpingInfo, error) {
	if len(b) != rpingInfoLen {
		return rpingInfo{}, fmt.Errorf("received bogus data, size %d", len(b))
	}
	return rpingInfo{binary.BigEndian.Uint64(b), binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])}, nil
}

// rpingFill writes ping number ping's data into b, as rping's client
// does: "rdma-ping-N: " then the letters from start on ('A' to 'z',
// wrapping), and a NUL in the last byte. It returns the next ping's
// start letter. len(b) must be at least rpingMinSize.
func rpingFill(b []byte, ping int, start byte) byte {
	// snprintf(buf, size, RPING_MSG_FMT, ping): at most size-1 bytes.
	hdr := "rdma-ping-" + strconv.Itoa(ping) + ": "
	cc := copy(b[:len(b)-1], hdr)
	c := start
	for i := cc; i < len(b); i++ {
		b[i] = c
		if c++; c > 122 {
			c = 65
		}
	}
	b[len(b)-1] = 0
	if start++; start > 122 {
		start = 65
	}
	return start
}

// cString is b up to its first NUL, as printf's %s reads it.
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

type rpingConfig struct {
	server, client bool
	addr           string
	port           int
	count          int // 0: forever (the client; the server serves until the client disconnects, as rping's does)
	size           int
	verbose        bool
	validate       bool
	debug          bool
}

// rpingFlags parses rping's command line: -s or -c, -a addr, -p port,
// -C count, -S size, -v, -V, -d; the boolean letters may be grouped as
// getopt allows ("-vV").
func rpingFlags(stderr io.Writer, args []string) (*rpingConfig, bool) {
	fs := flag.NewFlagSet("rping", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &rpingConfig{}
	fs.BoolVar(&c.server, "s", false, "server side")
	fs.BoolVar(&c.client, "c", false, "client side")
	fs.StringVar(&c.addr, "a", "", "`address`: the server's (client), the one to listen on (server; default all IPv4 addresses)")
	fs.IntVar(&c.port, "p", rpingPort, "`port`")
	fs.IntVar(&c.count, "C", 0, "ping `count` times (client; default forever)")
	fs.IntVar(&c.size, "S", rpingSize, fmt.Sprintf("ping data `size` (%d to %d)", rpingMinSize, rpingMaxSize))
	fs.BoolVar(&c.verbose, "v", false, "display ping data to stdout")
	fs.BoolVar(&c.validate, "V", false, "validate ping data (client)")
	fs.BoolVar(&c.debug, "d", false, "debug printfs")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: goverbs rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]")
		fmt.Fprintln(fs.Output(), "       goverbs rping -c [-vVd] [-S size] [-C count] -a addr [-p port]")
		fmt.Fprintln(fs.Output(), "wire-compatible with rdma-core's rping, either side")
		fs.PrintDefaults()
	}
	if err := fs.Parse(splitBoolFlags(args, "scvVd")); err != nil {
		return nil, false
	}
	switch {
	case fs.NArg() != 0, c.server == c.client, c.client && c.addr == "":
		fs.Usage()
		return nil, false
	case c.size < rpingMinSize || c.size > rpingMaxSize:
		fmt.Fprintf(stderr, "goverbs: rping: invalid size %d (valid range is %d to %d)\n", c.size, rpingMinSize, rpingMaxSize)
		return nil, false
	case c.count < 0:
		fmt.Fprintf(stderr, "goverbs: rping: invalid count %d\n", c.count)
		return nil, false
	case c.port < 1 || c.port > 65535:
		fmt.Fprintf(stderr, "goverbs: rping: invalid port %d\n", c.port)
		return nil, false
	}
	return c, true
}

// splitBoolFlags turns getopt's grouped boolean letters ("-vVd") into
// flags of their own ("-v", "-V", "-d"), for package flag; an argument
// with any other letter is left alone.
func splitBoolFlags(args []string, letters string) []string {
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.Trim(a[1:], letters) == "" {
			for _, l := range a[1:] {
				out = append(out, "-"+string(l))
			}
			continue
		}
		out = append(out, a)
	}
	return out
}
