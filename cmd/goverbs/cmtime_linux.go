package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

func init() { registerInterruptible("cmtime", cmtimeSummary, cmtimeTo) }

// cmtime, as rdma-core's: the client makes every connection at once and
// waits for them all, then closes them all at once; the server accepts
// until it is interrupted, closing each connection when its peer
// disconnects. Where cmtime times each librdmacm step (create id,
// resolve addr, resolve route, create qp, connect, disconnect, destroy),
// goverbs times the two calls that do them: rdmacm.Dial and Conn.Close.
func cmtimeTo(ctx context.Context, stdout, stderr io.Writer, args []string) int {
	c, ok := cmtimeFlags(stderr, args)
	if !ok {
		return 2
	}
	if c.prof != "" {
		f, err := os.Create(c.prof)
		if err != nil {
			return failTo(stderr, "cmtime: %v", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return failTo(stderr, "cmtime: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	var err error
	if c.server != "" {
		err = cmtimeClient(ctx, stdout, c)
	} else {
		err = cmtimeServer(ctx, stdout, stderr, c)
	}
	if err != nil {
		return failTo(stderr, "cmtime: %v", err)
	}
	return 0
}

// cmtimeConn is both sides' connection, as cmtime's: one send and one
// receive request of one SGE, one RDMA read in flight each way.
func cmtimeConn() *rdmacm.Config {
	return &rdmacm.Config{
		Cap:                uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
		ResponderResources: 1,
		InitiatorDepth:     1,
		// Every request of a client's burst waits its turn.
		Backlog: 1024,
	}
}

func cmtimeClient(ctx context.Context, out io.Writer, c *cmtimeConfig) error {
	addr := net.JoinHostPort(c.server, strconv.Itoa(c.port))
	cfg := cmtimeConn()
	conns := make([]*rdmacm.Conn, c.conns)
	errs := make([]error, c.conns)
	took := make([]time.Duration, c.conns)
	// each runs f for every connection at once and times the whole and
	// each; it returns the first error and how many failed.
	each := func(step *cmtimeStep, f func(i int) error) error {
		start := time.Now()
		var wg sync.WaitGroup
		for i := range c.conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				errs[i] = f(i)
				took[i] = time.Since(t0)
			}()
		}
		wg.Wait()
		step.total = time.Since(start)
		var first error
		failed := 0
		for i, err := range errs {
			if err != nil {
				if failed++; first == nil {
					first = err
				}
				continue
			}
			step.add(took[i])
		}
		if first != nil {
			return fmt.Errorf("%s: %d of %d connections failed, the first: %w", step.name, failed, c.conns, first)
		}
		return nil
	}
	steps := []cmtimeStep{{name: "connect"}, {name: "disconnect"}}
	err := each(&steps[0], func(i int) (err error) {
		conns[i], err = rdmacm.Dial(ctx, addr, cfg)
		return err
	})
	if err != nil {
		for _, conn := range conns {
			if conn != nil {
				conn.Close()
			}
		}
		return err
	}
	if err := each(&steps[1], func(i int) error { return conns[i].Close() }); err != nil {
		return err
	}
	cmtimeReport(out, steps, c.conns)
	return nil
}

func cmtimeServer(ctx context.Context, out, errOut io.Writer, c *cmtimeConfig) error {
	l, err := rdmacm.Listen(ctx, net.JoinHostPort(c.bind, strconv.Itoa(c.port)), cmtimeConn())
	if err != nil {
		return err
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { // before the listener closes: every connection is closed
		cancel()
		wg.Wait()
	}()
	var served atomic.Int64
	for {
		// Each request is answered on a goroutine of its own, as a Go
		// server serves each connection: the QP is made and the
		// connection established while the next request is taken.
		req, err := l.AcceptRequest(ctx)
		switch {
		case ctx.Err() != nil:
			wg.Wait()
			fmt.Fprintf(out, "%d connections served\n", served.Load())
			return nil
		case err != nil:
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := req.Accept(ctx, nil)
			if err != nil {
				if ctx.Err() == nil {
					fmt.Fprintf(errOut, "goverbs: cmtime: %v\n", err)
				}
				return
			}
			served.Add(1)
			select {
			case <-conn.Disconnected():
			case <-ctx.Done():
			}
			conn.Close()
		}()
	}
}
