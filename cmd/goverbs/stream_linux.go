package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/goverbs/goverbs/rdmanet"
)

func init() { registerInterruptible("stream", streamSummary, streamTo) }

// streamTo runs stream with args, printing to stdout and stderr; ctx ends
// a server that waits for its client, or a run under way.
func streamTo(ctx context.Context, stdout, stderr io.Writer, args []string) int {
	c, ok := streamFlags(stderr, args)
	if !ok {
		return 2
	}
	lat, bw := streamTests(c)
	conns := [][]streamTest{lat, bw}
	if c.custom {
		conns = conns[:1]
	}
	var l net.Listener
	if c.server == "" {
		var err error
		if l, err = c.listen(ctx); err != nil {
			return failTo(stderr, "stream: %v", err)
		}
		defer l.Close()
		stop := context.AfterFunc(ctx, func() { l.Close() })
		defer stop()
	}
	streamHeader(stdout)
	for _, tests := range conns {
		if len(tests) == 0 {
			continue
		}
		conn, err := c.connect(ctx, l)
		if err != nil {
			return failTo(stderr, "stream: %v", err)
		}
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		err = c.runTests(conn, tests, stdout)
		stop()
		if cerr := conn.Close(); err == nil && cerr != nil && c.server != "" {
			err = cerr
		}
		if err != nil {
			return failTo(stderr, "stream: %v", err)
		}
	}
	return 0
}

func (c *streamConfig) listen(ctx context.Context) (net.Listener, error) {
	addr := net.JoinHostPort(c.bind, strconv.Itoa(c.port))
	if c.tcp {
		var lc net.ListenConfig
		return lc.Listen(ctx, "tcp4", addr)
	}
	if c.bind == "" {
		addr = netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(c.port)).String()
	}
	lc := rdmanet.ListenConfig{Config: rdmanet.Config{BusyPoll: c.busyPoll}}
	return lc.Listen(ctx, "rdma", addr)
}

// connect accepts the next connection (server) or dials one (client).
func (c *streamConfig) connect(ctx context.Context, l net.Listener) (net.Conn, error) {
	if l != nil {
		return l.Accept()
	}
	addr := net.JoinHostPort(c.server, strconv.Itoa(c.port))
	if c.tcp {
		var d net.Dialer
		return d.DialContext(ctx, "tcp4", addr)
	}
	d := rdmanet.Dialer{Config: rdmanet.Config{BusyPoll: c.busyPoll}}
	return d.DialContext(ctx, "rdma", addr)
}

// runTests runs tests on conn, each after a 16-byte exchange that starts
// both sides together, and prints a row for each.
func (c *streamConfig) runTests(conn net.Conn, tests []streamTest, w io.Writer) error {
	client := c.server != ""
	var sync [16]byte
	maxSize := 0
	for _, t := range tests {
		maxSize = max(maxSize, t.size)
	}
	buf := make([]byte, maxSize)
	for _, t := range tests {
		if err := exchange(conn, sync[:], client); err != nil {
			return fmt.Errorf("%s: sync: %w", t.name, err)
		}
		start := time.Now()
		for range t.iters {
			if err := exchangeN(conn, buf[:t.size], t.count, client); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
		}
		streamRow(w, t, time.Since(start))
	}
	return nil
}

// exchange sends b and reads as many bytes back (the client), or the
// reverse (the server).
func exchange(conn net.Conn, b []byte, client bool) error { return exchangeN(conn, b, 1, client) }

// exchangeN makes count transfers of b one way, then count the other.
func exchangeN(conn net.Conn, b []byte, count int, client bool) error {
	send := func() error {
		for range count {
			if _, err := conn.Write(b); err != nil {
				return err
			}
		}
		return nil
	}
	recv := func() error {
		for range count {
			if _, err := io.ReadFull(conn, b); err != nil {
				return err
			}
		}
		return nil
	}
	first, second := recv, send
	if client {
		first, second = send, recv
	}
	if err := first(); err != nil {
		return err
	}
	return second()
}
