package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

func init() { registerInterruptible("cmtime", cmtimeSummary, cmtimeTo) }

// cmtime, as rdma-core's: the client makes every connection at once and
// waits for them all, then closes them all at once; the server accepts
// until it is interrupted, closing each connection when its peer
// disconnects. As cmtime's, the connections of each side share one CQ
// (cmtimeShared). Where cmtime times each librdmacm step (create id,
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
	switch {
	case c.steps && c.server != "":
		err = cmtimeStepsClient(ctx, stdout, c)
	case c.server != "":
		err = cmtimeClient(ctx, stdout, c)
	default:
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

// cmtimeShared opens the device whose GID table holds ip, with the PD and
// the CQ that every connection's QP shares, as cmtime's do: librdmacm
// writes the CQs it makes for cmtime's first QP into the QP attributes
// that cmtime gives every rdma_create_qp, so all of its connections use
// the first one's. close closes them.
func cmtimeShared(ip netip.Addr, cfg *rdmacm.Config) (close func(), err error) {
	devs, err := uverbs.Devices()
	if err != nil {
		return nil, err
	}
	for _, d := range devs {
		vctx, err := d.Open()
		if err != nil {
			continue
		}
		if _, err := vctx.FindGID(1, uverbs.GIDTypeRoCEv2, ip); err != nil {
			vctx.Close()
			continue
		}
		pd, err := vctx.AllocPD()
		if err != nil {
			vctx.Close()
			return nil, err
		}
		q, err := vctx.NewCQ(cq.Config{Size: 2 * cmtimeCQPerConn})
		if err != nil {
			pd.Close()
			vctx.Close()
			return nil, err
		}
		cfg.PD, cfg.CQ = pd, q
		return func() { q.Close(); pd.Close(); vctx.Close() }, nil
	}
	return nil, fmt.Errorf("no RDMA device has address %v", ip)
}

// cmtimeCQPerConn is the shared CQ's size, as cmtime's first connection
// makes it: one entry for its one send and one receive request.
const cmtimeCQPerConn = 1

// localAddr is the address this host reaches server from.
func localAddr(server string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(server)
	if err != nil {
		return netip.Addr{}, err
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 9)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

func cmtimeClient(ctx context.Context, out io.Writer, c *cmtimeConfig) error {
	addr := net.JoinHostPort(c.server, strconv.Itoa(c.port))
	cfg := cmtimeConn()
	if local, err := localAddr(c.server); err == nil { // else a name: each connection makes its own CQ
		closeShared, err := cmtimeShared(local, cfg)
		if err != nil {
			return err
		}
		defer closeShared()
	}
	// Each connection is one goroutine's, as a Go client's connections
	// are: it dials, waits for the disconnect step, and closes.
	steps := []cmtimeStep{{name: "connect"}, {name: "disconnect"}}
	errs := make([]error, c.conns)
	took := make([]time.Duration, c.conns)
	// collect waits for every connection's step and times the whole;
	// it returns the first error and how many failed.
	collect := func(step *cmtimeStep, start time.Time, wg *sync.WaitGroup) error {
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
	var dialed, closed sync.WaitGroup
	disconnect := make(chan struct{}) // closed to start the disconnect step
	timed := false                    // whether it is timed, set before the close
	start := time.Now()
	for i := range c.conns {
		dialed.Add(1)
		closed.Add(1)
		go func() {
			defer closed.Done()
			t0 := time.Now()
			conn, err := rdmacm.Dial(ctx, addr, cfg)
			errs[i], took[i] = err, time.Since(t0)
			dialed.Done()
			<-disconnect
			if conn == nil {
				return
			}
			t0 = time.Now()
			err = conn.Close()
			if timed {
				errs[i], took[i] = err, time.Since(t0)
			}
		}()
	}
	if err := collect(&steps[0], start, &dialed); err != nil {
		close(disconnect) // untimed: the dial's error is the one to report
		closed.Wait()
		return err
	}
	start, timed = time.Now(), true
	close(disconnect)
	if err := collect(&steps[1], start, &closed); err != nil {
		return err
	}
	cmtimeReport(out, steps, c.conns)
	return nil
}

func cmtimeServer(ctx context.Context, out, errOut io.Writer, c *cmtimeConfig) error {
	cfg := cmtimeConn()
	if c.bind != "" { // else the connections may come to any device: each makes its own CQ
		ip, err := netip.ParseAddr(c.bind)
		if err != nil {
			return fmt.Errorf("-b takes an IP address: %w", err)
		}
		closeShared, err := cmtimeShared(ip, cfg)
		if err != nil {
			return err
		}
		defer closeShared()
	}
	l, err := rdmacm.Listen(ctx, net.JoinHostPort(c.bind, strconv.Itoa(c.port)), cfg)
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

// cmtimeStepsClient is cmtime's client on rdmacm's low level: every ID on
// one EventChannel, each step issued for every connection and then its
// events awaited, as cmtime's event thread does. Where cmtime leaves the
// QPs and CQs to its exit, "destroy qp" times their destruction, so that
// "destroy" is the IDs' alone, as cmtime's row.
func cmtimeStepsClient(ctx context.Context, out io.Writer, c *cmtimeConfig) error {
	ip, err := netip.ParseAddr(c.server)
	if err != nil {
		return fmt.Errorf("-steps takes an IP address: %w", err)
	}
	dst := netip.AddrPortFrom(ip, uint16(c.port))
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		return err
	}
	defer ch.Close()
	n := c.conns
	ids := make([]*rdmacm.ID, n)
	qps := make([]*uverbs.QP, n)
	cqs := make([]*cq.CQ, n)
	ccs := make([]*cq.Channel, n)
	index := make(map[*rdmacm.ID]int, n)
	start := make([]time.Time, n)
	var parts [5]time.Duration // create qp's: ID.PD (the first opens the device), the channel, the CQ, the QP, AttachQP
	steps := []cmtimeStep{{name: "create id"}, {name: "resolve addr"}, {name: "resolve route"}, {name: "create qp"},
		{name: "connect"}, {name: "disconnect"}, {name: "destroy qp"}, {name: "destroy"}}
	// serial times f for each connection in turn.
	serial := func(s *cmtimeStep, f func(i int) error) error {
		t0 := time.Now()
		for i := range n {
			t := time.Now()
			if err := f(i); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			s.add(time.Since(t))
		}
		s.total = time.Since(t0)
		return nil
	}
	// async issues f for each connection, then reads the channel until
	// each has had the event want; a connection's time runs from its
	// call to its event.
	async := func(s *cmtimeStep, want rdmacm.EventType, f func(i int) error) error {
		t0 := time.Now()
		for i := range n {
			start[i] = time.Now()
			if err := f(i); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
		for left := n; left > 0; {
			ev, err := ch.Wait(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			i, ok := index[ev.ID]
			typ, evErr := ev.Type, ev.Err()
			ev.Ack()
			switch {
			case !ok:
				continue
			case typ != want:
				return fmt.Errorf("%s: connection %d: event %v (%v), want %v", s.name, i, typ, evErr, want)
			}
			s.add(time.Since(start[i]))
			left--
		}
		s.total = time.Since(t0)
		return nil
	}
	defer func() { // what a failed step left
		for i := range n {
			if qps[i] != nil {
				qps[i].Close()
				cqs[i].Close()
				ccs[i].Close()
			}
			if ids[i] != nil {
				ids[i].Close()
			}
		}
	}()
	timeout := 2 * time.Second
	cfg := cmtimeConn()
	run := []func() error{
		func() error {
			return serial(&steps[0], func(i int) (err error) {
				ids[i], err = ch.NewID(rdmacm.PortSpaceTCP)
				index[ids[i]] = i
				return err
			})
		},
		func() error {
			return async(&steps[1], rdmacm.EventAddrResolved, func(i int) error {
				return ids[i].ResolveAddr(netip.AddrPort{}, dst, timeout)
			})
		},
		func() error {
			return async(&steps[2], rdmacm.EventRouteResolved, func(i int) error { return ids[i].ResolveRoute(timeout) })
		},
		func() error {
			return serial(&steps[3], func(i int) error {
				t := time.Now()
				lap := func(k int) {
					now := time.Now()
					parts[k] += now.Sub(t)
					t = now
				}
				pd, err := ids[i].PD()
				if err != nil {
					return err
				}
				lap(0)
				vctx := pd.Context()
				if ccs[i], err = vctx.NewCompChannel(); err != nil {
					return err
				}
				lap(1)
				if cqs[i], err = vctx.NewCQ(cq.Config{Size: 2, Channel: ccs[i]}); err != nil {
					ccs[i].Close()
					return err
				}
				lap(2)
				qp, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: cqs[i], RecvCQ: cqs[i], Cap: cfg.Cap})
				if err != nil {
					cqs[i].Close()
					ccs[i].Close()
					return err
				}
				qps[i] = qp
				lap(3)
				err = ids[i].AttachQP(qp)
				lap(4)
				return err
			})
		},
		func() error {
			return async(&steps[4], rdmacm.EventEstablished, func(i int) error {
				return ids[i].Connect(&rdmacm.ConnParam{ResponderResources: cfg.ResponderResources, InitiatorDepth: cfg.InitiatorDepth,
					RetryCount: 7, RNRRetryCount: 7})
			})
		},
		func() error {
			return async(&steps[5], rdmacm.EventDisconnected, func(i int) error { return ids[i].Disconnect() })
		},
		func() error {
			return serial(&steps[6], func(i int) error {
				err := errors.Join(qps[i].Close(), cqs[i].Close(), ccs[i].Close())
				qps[i] = nil
				return err
			})
		},
		func() error {
			return serial(&steps[7], func(i int) error {
				err := ids[i].Close()
				ids[i] = nil
				return err
			})
		},
	}
	for _, f := range run {
		if err := f(); err != nil {
			return err
		}
	}
	cmtimeReport(out, steps, n)
	// Not a row of cmtime's (the bench harness sums those): where the
	// step that differs most from librdmacm's goes.
	per := func(k int) float64 { return us(parts[k]) / float64(n) }
	fmt.Fprintf(out, "create qp in parts, us per connection: pd %.2f, comp channel %.2f, cq %.2f, qp %.2f, attach (init) %.2f\n",
		per(0), per(1), per(2), per(3), per(4))
	return nil
}
