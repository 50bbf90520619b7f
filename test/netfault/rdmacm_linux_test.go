package netfault

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// Issue #41's scenario 5, on package rdmacm: a Dial into a black hole,
// a connection whose peer vanishes (its process killed, or its link
// pulled), and many connections made through a lossy link.

// fullSize is set (GOVERBS_NETFAULT_FULL=1) for the full sizes:
// 100 connections, a 256 MiB stream. make test runs the small defaults,
// since TCG moves rdmanet's bytes at about 10 MB/s on a clean link.
var fullSize = os.Getenv("GOVERBS_NETFAULT_FULL") == "1"

// cmWait bounds each step that should take milliseconds on a clean link
// (TCG is slow; the bound is for a hang, not a measurement).
const cmWait = 30 * time.Second

func init() {
	roles["cm-accept"] = cmAcceptRole
}

// cmAcceptRole is host B's connection-manager peer in a process of its
// own, so that the test can kill it: it listens on args[0], prints
// "ADDR a.b.c.d:port", accepts one connection with a receive posted,
// prints "CONNECTED" and holds it until it is killed.
func cmAcceptRole(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("cm-accept wants one address, got %q", args)
	}
	exitLater()
	ctx := context.Background()
	var mr *uverbs.MR
	l, err := rdmacm.Listen(ctx, args[0], &rdmacm.Config{Setup: func(c *rdmacm.Conn) error {
		buf := make([]byte, 4096) // lives as long as the process: the MR is never closed
		var err error
		if mr, err = c.PD().RegMR(buf, uverbs.AccessLocalWrite); err != nil {
			return err
		}
		sge, err := mr.SGE(0, len(buf))
		if err != nil {
			return err
		}
		_, err = c.QP().PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{sge}}})
		return err
	}})
	if err != nil {
		return err
	}
	fmt.Printf("ADDR %s\n", l.Addr())
	c, err := l.Accept(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("CONNECTED %s\n", c.RemoteAddr())
	select {}
}

// exitLater ends a host's process after five minutes whatever it does,
// so that one whose test died never outlives it.
func exitLater() {
	time.AfterFunc(5*time.Minute, func() {
		fmt.Println("ROLE TIMEOUT")
		os.Exit(3)
	})
}

// withinBound fails t if took exceeds limit, naming what took it.
func withinBound(t *testing.T, what string, took, limit time.Duration) {
	t.Helper()
	if took > limit {
		t.Errorf("%s took %v, more than the %v allowed", what, took.Round(time.Millisecond), limit)
	}
}

// A Dial to a host that drops every packet (netem with 100 % loss on
// both ends of the link, after a first connection has filled the ARP
// caches, so the connection request is what is lost) honours its
// context's deadline: it returns within the deadline and a little, with
// an error that errors.Is both context.DeadlineExceeded and
// os.ErrDeadlineExceeded (package rdmacm documents both), and leaves no
// fd open (the connection's event channel and the device it opened are
// closed). Taking the loss away, a Dial goes through again.
func TestCMDialBlackHole(t *testing.T) {
	requireTwoHosts(t)
	fds0 := testutil.OpenFDs(t)
	ctx := context.Background()
	l, err := rdmacm.Listen(ctx, netip.AddrPortFrom(hostB.addr, 0).String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var accepted sync.WaitGroup
	defer func() {
		// Every fd the test opened is closed once the listener and the
		// connections it accepted are.
		l.Close()
		accepted.Wait()
		if n := waitFDs(t, fds0); n != fds0 {
			t.Errorf("fd leak: %d fds open before the test, %d after", fds0, n)
		}
	}()
	served := make(chan struct{}, 4) // a connection the listener accepted is closed
	accepted.Add(1)
	go func() {
		defer accepted.Done()
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer accepted.Done()
				<-c.Disconnected()
				c.Close()
				served <- struct{}{}
			}()
		}
	}()
	addr := l.Addr().String()
	dial := func(d time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		start := time.Now()
		c, err := rdmacm.Dial(ctx, addr, nil)
		took := time.Since(start)
		if err == nil {
			c.Close()
		}
		return took, err
	}
	if took, err := dial(cmWait); err != nil { // the ARP caches warm
		dumpNet(t)
		t.Fatalf("Dial %s on a clean link: %v", addr, err)
	} else {
		t.Logf("Dial %s on a clean link: %v", addr, took.Round(time.Millisecond))
	}
	select { // the listener's end closes at the DREQ, after the dialer's Close returns
	case <-served:
	case <-time.After(cmWait):
		t.Fatal("the listener's end of the first connection did not close")
	}
	fds := testutil.OpenFDs(t)

	<-schedule(t, impair(0, hostA, netlink.Netem{Loss: 1}), impair(0, hostB, netlink.Netem{Loss: 1}))
	const deadline = 2 * time.Second
	took, err := dial(deadline)
	t.Logf("Dial %s through 100 %% loss, %v deadline: after %v: %v", addr, deadline, took.Round(time.Millisecond), err)
	switch {
	case err == nil:
		t.Fatal("Dial through a link that drops every packet succeeded")
	case !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded):
		t.Errorf("Dial's error is neither context.DeadlineExceeded and os.ErrDeadlineExceeded both: %v", err)
	}
	var oe *rdmacm.OpError
	if !errors.As(err, &oe) {
		t.Errorf("Dial's error is a %T, not an *rdmacm.OpError: %v", err, err)
	}
	withinBound(t, "Dial with a 2 s deadline", took, deadline+time.Second)
	if after := waitFDs(t, fds); after != fds {
		t.Errorf("%d fds open before the failed Dial, %d after", fds, after)
	}

	<-schedule(t, repair(0, hostA), repair(0, hostB))
	if took, err := dial(cmWait); err != nil {
		t.Errorf("Dial after the loss ended: %v", err)
	} else {
		t.Logf("Dial after the loss ended: %v", took.Round(time.Millisecond))
	}
}

// waitFDs waits up to 5 s for the process to have want fds open (the
// goroutines of a Conn that failed end just after Dial returns) and
// returns how many it has.
func waitFDs(t *testing.T, want int) int {
	t.Helper()
	var n int
	testutil.WaitUntil(5*time.Second, func() bool { n = testutil.OpenFDs(t); return n == want })
	return n
}

// A connection whose peer vanishes, the peer a process of its own on
// host B (so that it can die as processes do: SIGKILL, with no Close);
// host A's side, in the test's process, survives. Two ways to vanish:
//
//   - killed: the kernel closes the dead process's rdma_cm fd and its CM
//     sends a DREQ on its behalf, so the survivor's Conn.Disconnected
//     closes within a bound, and a SEND posted after it fails (flushed,
//     or refused at the post);
//   - unplugged: host B's end of the veth pair goes down first, so that
//     no CM message can arrive (the process is alive, and killed only
//     after the check). An idle RC connection never notices: nothing is
//     sent, so nothing fails, and Disconnected stays open (asserted for
//     a few seconds). The next operation does notice: a SEND retries
//     (rxe's retry budget: the retry count of 7 times the ack timeout
//     the CM set) and completes with an error, within a bound.
func TestCMPeerVanishes(t *testing.T) {
	requireTwoHosts(t)
	for _, how := range []string{"killed", "unplugged"} {
		t.Run(how, func(t *testing.T) { testCMPeerVanishes(t, how) })
	}
}

func testCMPeerVanishes(t *testing.T, how string) {
	p := runHost(t, "cm-accept", nil, nil, netip.AddrPortFrom(hostB.addr, 0).String())
	addr := p.Expect(t, "ADDR ", time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), cmWait)
	defer cancel()
	c, err := rdmacm.Dial(ctx, addr, nil)
	if err != nil {
		dumpNet(t)
		t.Fatalf("Dial %s: %v", addr, err)
	}
	defer c.Close()
	p.Expect(t, "CONNECTED ", time.Minute)
	t.Logf("connected %s to host B's process at %s", c.LocalAddr(), c.RemoteAddr())

	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := c.PD().RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close() // before the Conn's Close: the Conn's PD is the package's
	sge, err := mr.SGE(0, 64)
	if err != nil {
		t.Fatal(err)
	}
	send := func() (cq.WC, time.Duration, error) {
		start := time.Now()
		if _, err := c.QP().PostSend([]uverbs.SendWR{{WRID: 7, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge}}}); err != nil {
			return cq.WC{}, time.Since(start), err
		}
		wcs := make([]cq.WC, 1)
		for deadline := start.Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			n, err := c.CQ().Poll(wcs)
			if err != nil {
				return cq.WC{}, time.Since(start), err
			}
			if n == 1 {
				return wcs[0], time.Since(start), nil
			}
		}
		return cq.WC{}, time.Since(start), fmt.Errorf("no completion in 2 minutes")
	}

	start := time.Now()
	switch how {
	case "killed":
		p.Kill()
		t.Logf("host B's process killed")
		select {
		case <-c.Disconnected():
			took := time.Since(start)
			t.Logf("Disconnected closed %v after the kill", took.Round(time.Millisecond))
		case <-time.After(cmWait):
			t.Fatalf("Disconnected still open %v after the peer was killed", cmWait)
		}
		wc, took, err := send()
		switch {
		case err != nil:
			t.Logf("a SEND posted after the peer's death: refused after %v: %v", took.Round(time.Millisecond), err)
		case wc.Status == cq.Success:
			t.Errorf("a SEND posted after the peer's death completed successfully")
		default:
			t.Logf("a SEND posted after the peer's death: completion %v (vendor error %#x) after %v", wc.Status, wc.VendorErr, took.Round(time.Millisecond))
		}
	case "unplugged":
		<-schedule(t, unplug(0, hostB))
		t.Cleanup(func() { linkUp(hostB) }) // before the kill, whatever happens
		select {
		case <-c.Disconnected():
			t.Logf("Disconnected closed %v after the unplug with nothing sent", time.Since(start).Round(time.Millisecond))
		case <-time.After(3 * time.Second):
			t.Logf("an idle connection does not notice the unplug: Disconnected is still open after 3 s")
		}
		wc, took, err := send()
		switch {
		case err != nil:
			t.Logf("a SEND posted after the unplug: refused after %v: %v", took.Round(time.Millisecond), err)
		case wc.Status == cq.Success:
			t.Errorf("a SEND to a host whose link is down completed successfully")
		default:
			t.Logf("a SEND posted after the unplug: completion %v (vendor error %#x) after %v", wc.Status, wc.VendorErr, took.Round(time.Millisecond))
			withinBound(t, "the SEND's failure", took, time.Minute)
		}
		select {
		case <-c.Disconnected():
			t.Logf("Disconnected closed after the failed SEND")
		default:
			t.Logf("Disconnected still open after the failed SEND: the CM heard nothing; the completion is the news")
		}
		// Host B's link comes back before its process dies: the kernel's
		// CM sends a DREQ for the dead process's connection, and rxe
		// moves a QP whose send finds no route (its netdev down) to the
		// error state for good, its GSI QP (QP1, every MAD of the
		// device) included; rxe1 would take part in no connection again.
		<-schedule(t, plug(0, hostB))
		p.Kill()
	}
	cerr := c.Close()
	t.Logf("Close: %v", cerr)
}

// Many connections made through 5 % loss each way (12, or 100 with
// GOVERBS_NETFAULT_FULL=1, 4 dials at a time): the CM's MADs are lost
// too and it retries them, so each Dial either succeeds or fails with
// an *rdmacm.OpError within its context's bound (a hang fails the test).
// On each connection made, host A sends 8 numbered messages, which host
// B receives all, once and in order, through the same loss (RC's
// retransmissions), and nothing more.
func TestCMManyThroughLoss(t *testing.T) {
	requireTwoHosts(t)
	n := 12
	if fullSize {
		n = 100
	}
	const msgs, msgSize = 8, 16
	type end struct {
		buf *uverbs.Buffer
		mr  *uverbs.MR
		c   *rdmacm.Conn
	}
	newEnd := func(c *rdmacm.Conn) (*end, error) {
		e := &end{c: c}
		var err error
		if e.buf, err = uverbs.AllocBuffer(msgs * msgSize); err != nil {
			return nil, err
		}
		if e.mr, err = c.PD().RegMR(e.buf.Bytes(), uverbs.AccessLocalWrite); err != nil {
			e.buf.Close()
			return nil, err
		}
		return e, nil
	}
	closeEnd := func(e *end) {
		e.mr.Close()
		e.buf.Close()
	}

	// Host B's receives are posted in Setup, before the acceptance, so
	// that host A's first SEND finds one.
	var mu sync.Mutex
	setups := map[*rdmacm.Conn]*end{}
	cfg := &rdmacm.Config{Setup: func(c *rdmacm.Conn) error {
		e, err := newEnd(c)
		if err != nil {
			return err
		}
		for i := range msgs {
			sge, err := e.mr.SGE(i*msgSize, msgSize)
			if err != nil {
				return err
			}
			if _, err := c.QP().PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{sge}}}); err != nil {
				return err
			}
		}
		mu.Lock()
		setups[c] = e
		mu.Unlock()
		return nil
	}}
	ctx := context.Background()
	l, err := rdmacm.Listen(ctx, netip.AddrPortFrom(hostB.addr, 0).String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *end, n)
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			e := setups[c]
			mu.Unlock()
			accepted <- e
		}
	}()

	<-schedule(t, impair(0, hostA, netlink.Netem{Loss: 0.05}), impair(0, hostB, netlink.Netem{Loss: 0.05}))
	const dialWait = 2 * time.Minute
	start := time.Now()
	dialed := make([]*end, n)
	errs := make([]error, n)
	took := make([]time.Duration, n)
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= n {
					return
				}
				ctx, cancel := context.WithTimeout(ctx, dialWait)
				s := time.Now()
				var pd [4]byte
				binary.BigEndian.PutUint32(pd[:], uint32(k))
				c, err := rdmacm.Dial(ctx, l.Addr().String(), &rdmacm.Config{PrivateData: pd[:]})
				took[k] = time.Since(s)
				cancel()
				if err != nil {
					errs[k] = err
					continue
				}
				if dialed[k], errs[k] = newEnd(c); errs[k] != nil {
					c.Close()
				}
			}
		}()
	}
	wg.Wait()
	setup := time.Since(start)
	defer func() {
		for _, e := range dialed {
			if e != nil {
				closeEnd(e)
				e.c.Close()
			}
		}
	}()
	var made int
	var slowest time.Duration
	for k := range n {
		slowest = max(slowest, took[k])
		if errs[k] != nil {
			var oe *rdmacm.OpError
			if !errors.As(errs[k], &oe) {
				t.Errorf("connection %d: Dial's error is a %T, not an *rdmacm.OpError: %v", k, errs[k], errs[k])
			}
			t.Logf("connection %d: Dial failed after %v: %v (ETIMEDOUT %t, deadline %t, refused %t)", k, took[k].Round(time.Millisecond), errs[k],
				errors.Is(errs[k], syscall.ETIMEDOUT), errors.Is(errs[k], context.DeadlineExceeded), errors.Is(errs[k], syscall.ECONNREFUSED))
			withinBound(t, "connection "+strconv.Itoa(k)+"'s failed Dial", took[k], dialWait+5*time.Second)
			continue
		}
		made++
	}
	t.Logf("%d of %d connections made through 5 %% loss each way in %v (slowest Dial %v)", made, n, setup.Round(time.Millisecond), slowest.Round(time.Millisecond))
	for _, e := range dialed {
		if e != nil { // what the CM gave the QP: it sets how long a lost packet costs
			a, err := e.c.QP().Query(uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry)
			t.Logf("the CM's QP attributes: local ACK timeout %d (%v), retry count %d, RNR retry %d (%v)", a.Timeout,
				time.Duration(4096<<a.Timeout)*time.Nanosecond, a.RetryCnt, a.RNRRetry, err)
			break
		}
	}

	// Host B's side of each connection made: its Accept may come a
	// little after the Dial (the RTU lost, and the REP sent again).
	ends := map[uint32]*end{}
	defer func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, e := range setups {
			closeEnd(e)
			e.c.Close()
		}
	}()
	for len(ends) < made {
		select {
		case e := <-accepted:
			ends[binary.BigEndian.Uint32(e.c.PrivateData())] = e
		case <-time.After(dialWait):
			t.Fatalf("host B accepted %d connections of the %d host A made", len(ends), made)
		}
	}

	// The messages: each SEND carries its connection's number and its
	// own; the receives were posted in order, so the k-th completion
	// must be the k-th receive holding the k-th message.
	start = time.Now()
	for k, a := range dialed {
		if a == nil {
			continue
		}
		b := ends[uint32(k)]
		if b == nil {
			t.Errorf("connection %d: host B accepted no connection with its number", k)
			continue
		}
		mem := a.buf.Bytes()
		wrs := make([]uverbs.SendWR, msgs)
		for m := range msgs {
			binary.BigEndian.PutUint64(mem[m*msgSize:], uint64(k))
			binary.BigEndian.PutUint64(mem[m*msgSize+8:], uint64(m))
			sge, err := a.mr.SGE(m*msgSize, msgSize)
			if err != nil {
				t.Fatal(err)
			}
			wrs[m] = uverbs.SendWR{WRID: uint64(m), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge}}
		}
		if _, err := a.c.QP().PostSend(wrs); err != nil {
			t.Errorf("connection %d: post the SENDs: %v", k, err)
			continue
		}
		if err := checkCompletions(a.c.CQ(), msgs, func(i int, wc cq.WC) error {
			if wc.Status != cq.Success || wc.WRID != uint64(i) {
				return fmt.Errorf("SEND %d: completion %v of WR %d", i, wc.Status, wc.WRID)
			}
			return nil
		}); err != nil {
			t.Errorf("connection %d, host A: %v", k, err)
		}
		got := b.buf.Bytes()
		if err := checkCompletions(b.c.CQ(), msgs, func(i int, wc cq.WC) error {
			if wc.Status != cq.Success || wc.WRID != uint64(i) || wc.ByteLen != msgSize {
				return fmt.Errorf("receive %d: completion %v of WR %d, %d bytes", i, wc.Status, wc.WRID, wc.ByteLen)
			}
			if c, m := binary.BigEndian.Uint64(got[i*msgSize:]), binary.BigEndian.Uint64(got[i*msgSize+8:]); c != uint64(k) || m != uint64(i) {
				return fmt.Errorf("receive %d holds message %d of connection %d", i, m, c)
			}
			return nil
		}); err != nil {
			t.Errorf("connection %d, host B: %v", k, err)
		}
	}
	t.Logf("%d messages on each of %d connections through the loss, all received once and in order, in %v", msgs, made, time.Since(start).Round(time.Millisecond))
}

// checkCompletions polls q for want completions, each of which check
// accepts (given its index), then for a moment more to see that no
// other comes: a completion missing, failed, out of order or one too
// many is an error.
func checkCompletions(q *cq.CQ, want int, check func(int, cq.WC) error) error {
	wcs := make([]cq.WC, want+1)
	got := 0
	deadline := time.Now().Add(time.Minute)
	for got < want {
		n, err := q.Poll(wcs[got:])
		if err != nil {
			return err
		}
		for i := got; i < got+n; i++ {
			if err := check(i, wcs[i]); err != nil {
				return err
			}
		}
		got += n
		if n == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("%d completions of %d in a minute", got, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if got > want {
		return fmt.Errorf("%d completions, want %d", got, want)
	}
	time.Sleep(10 * time.Millisecond)
	if n, _ := q.Poll(wcs[:1]); n != 0 {
		return fmt.Errorf("a completion more than the %d: %v of WR %d", want, wcs[0].Status, wcs[0].WRID)
	}
	return nil
}
