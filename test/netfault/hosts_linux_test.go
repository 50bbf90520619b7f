package netfault

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uverbs"
)

// host is one of the guest's two hosts: its address, its end of the veth
// pair and the rxe device on it. The guest routes what the machine sends
// to peer out of netdev, by a route in table (test/vm/guest's crossRoute).
type host struct {
	name   string
	addr   netip.Addr
	netdev string
	device string
	peer   netip.Addr
	table  uint32
}

var (
	hostA = host{"A", netip.MustParseAddr("192.0.2.1"), "veth0", "rxe0", netip.MustParseAddr("192.0.2.2"), 100}
	hostB = host{"B", netip.MustParseAddr("192.0.2.2"), "veth1", "rxe1", netip.MustParseAddr("192.0.2.1"), 101}
)

func (h host) String() string {
	return fmt.Sprintf("host %s (%s, %s on %s)", h.name, h.addr, h.device, h.netdev)
}

// gid is h's RoCE v2 GID (index 1: its IPv4 address).
func (h host) gid(t testing.TB) uverbs.GID {
	t.Helper()
	b, err := os.ReadFile("/sys/class/infiniband/" + h.device + "/ports/1/gids/1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s's GID 1: %v", h.device, err)
	}
	return uverbs.GID(a.As16())
}

// A fault is one step of a schedule: what is done to the link, and when,
// counted from the schedule's start.
type fault struct {
	at   time.Duration
	what string
	do   func() error
}

// impair puts netem n on the egress of h's end: what h sends suffers it.
func impair(at time.Duration, h host, n netlink.Netem) fault {
	return fault{at, fmt.Sprintf("netem %v on %s's %s", n, h.name, h.netdev), func() error { return netlink.NetemSet(h.netdev, n) }}
}

// repair takes netem off h's end.
func repair(at time.Duration, h host) fault {
	return fault{at, fmt.Sprintf("no netem on %s's %s", h.name, h.netdev), func() error { return netemDel(h) }}
}

// unplug sets h's end of the pair down: h's rxe port goes down, and the
// other end loses its carrier, as when a cable is pulled at h.
func unplug(at time.Duration, h host) fault {
	return fault{at, fmt.Sprintf("%s's %s down", h.name, h.netdev), func() error { return netlink.LinkSetDown(h.netdev) }}
}

// plug sets h's end up again, with the route that setting it down took.
func plug(at time.Duration, h host) fault {
	return fault{at, fmt.Sprintf("%s's %s up", h.name, h.netdev), func() error { return linkUp(h) }}
}

func netemDel(h host) error {
	err := netlink.NetemDel(h.netdev)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) { // no netem there
		return nil
	}
	return err
}

// linkUp sets h's end up and puts back its route to the peer (IPv4
// deletes the routes through a device that goes down), then waits for h's
// rxe port to be active again.
func linkUp(h host) error {
	if err := linkUpRoute(h); err != nil {
		return err
	}
	return portActive(h)
}

// linkUpRoute sets h's end up and adds back its route to the peer.
func linkUpRoute(h host) error {
	if err := netlink.LinkSetUp(h.netdev); err != nil {
		return err
	}
	err := netlink.RouteAdd(netip.PrefixFrom(h.peer, 32), h.netdev, h.table)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return nil
}

// portActive waits for h's rxe port to be active: 10 s at most. A port
// is active once both ends of the pair are up (its netdev's carrier). A
// device that is not there (a test deleted it, and makes it again) has no
// port to wait for.
func portActive(h host) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile("/sys/class/infiniband/" + h.device + "/ports/1/state")
		if err == nil && strings.Contains(string(b), "ACTIVE") || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s's port is not active 10 s after %s came up: %q %v", h.device, h.netdev, b, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// heal undoes every fault: no netem, both ends up, both routes there,
// both ports active (each waits for the other end to be up).
func heal() error {
	var errs []error
	for _, h := range []host{hostA, hostB} {
		errs = append(errs, netemDel(h), linkUpRoute(h))
	}
	for _, h := range []host{hostA, hostB} {
		errs = append(errs, portActive(h))
	}
	return errors.Join(errs...)
}

// schedule runs the faults in order, each at its time, logging what it
// did; the channel closes when the last has run. The test's end heals
// the link, whatever the schedule did.
func schedule(t *testing.T, faults ...fault) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		for _, f := range faults {
			time.Sleep(time.Until(start.Add(f.at)))
			err := f.do()
			t.Logf("t+%v: %s", time.Since(start).Round(time.Millisecond), f.what)
			if err != nil {
				t.Errorf("%s: %v", f.what, err)
			}
		}
	}()
	t.Cleanup(func() { <-done })
	return done
}

// both runs host A's and host B's parts of a scenario at once and
// returns their errors when both have ended.
func both(a, b func() error) (errA, errB error) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		errB = b()
	}()
	errA = a()
	wg.Wait()
	return errA, errB
}

// roles are the parts a host's own process can play, by name; each takes
// the arguments runHost passed and writes what the test reads to stdout.
var roles = testutil.Roles{}

func TestMain(m *testing.M) { roles.Main(m) }

// runHost starts role with args in a process of its own (this test
// binary again), with files as its fds 3 and on. tap, if not nil, sees
// each line first and keeps a line it returns true for (a progress
// report) from Expect. The test's end heals the link, then kills the
// process if it still runs.
func runHost(t *testing.T, role string, files []*os.File, tap func(line string) bool, args ...string) *testutil.Proc {
	t.Helper()
	p := testutil.StartRole(t, role, &testutil.ProcOptions{Files: files, Tap: tap}, args...)
	// Cleanups run last first: this one before StartRole's kill. A
	// process killed while its host's link is down has its kernel CM send
	// into the dead link, and on 6.1 rxe then never takes part in a
	// connection again.
	t.Cleanup(func() { heal() })
	return p
}

// rcEnd is one host's side of an RC connection made by hand: the host's
// device, a PD, a CQ for each queue, the QP and a registered buffer.
type rcEnd struct {
	h   host
	ctx *uverbs.Context
	pd  *uverbs.PD
	scq *cq.CQ
	rcq *cq.CQ
	qp  *uverbs.QP
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

// openRC opens h's device and makes an RC QP of depth entries a queue
// with a bufSize buffer registered for every access; the test's end
// closes it all.
func openRC(t *testing.T, h host, bufSize int, depth uint32) *rcEnd {
	t.Helper()
	e := &rcEnd{h: h}
	var err error
	fail := func(what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %s: %v", h, what, err)
		}
	}
	e.ctx, err = uverbs.Open(h.device)
	fail("open")
	t.Cleanup(e.close)
	e.pd, err = e.ctx.AllocPD()
	fail("alloc PD")
	e.buf, err = uverbs.AllocBuffer(bufSize)
	fail("buffer")
	e.mr, err = e.pd.RegMR(e.buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	fail("reg MR")
	e.scq, err = e.ctx.NewCQ(cq.Config{Size: int(depth)})
	fail("send CQ")
	e.rcq, err = e.ctx.NewCQ(cq.Config{Size: int(depth)})
	fail("recv CQ")
	e.qp, err = e.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: e.scq, RecvCQ: e.rcq,
		Cap: uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	fail("QP")
	return e
}

func (e *rcEnd) close() {
	if e.qp != nil {
		e.qp.Close()
	}
	if e.mr != nil {
		e.mr.Close()
	}
	for _, q := range []*cq.CQ{e.scq, e.rcq} {
		if q != nil {
			q.Close()
		}
	}
	if e.pd != nil {
		e.pd.Close()
	}
	if e.buf != nil {
		e.buf.Close()
	}
	if e.ctx != nil {
		e.ctx.Close()
	}
}

// connectRC brings a and b to RTS, each the other's peer, from RESET
// (a QP in ERR is reset first), starting their send queues at psn; opts
// set the retry budget and the rest (GIDIndex 1 always).
func connectRC(t *testing.T, a, b *rcEnd, psn uint32, opts uverbs.ConnectOptions) {
	t.Helper()
	opts.GIDIndex = 1
	if opts.Access == 0 {
		opts.Access = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	}
	ea := uverbs.Endpoint{QPN: a.qp.QPN(), PSN: psn, GID: a.h.gid(t)}
	eb := uverbs.Endpoint{QPN: b.qp.QPN(), PSN: psn, GID: b.h.gid(t)}
	for _, p := range []struct {
		e           *rcEnd
		local, peer uverbs.Endpoint
	}{{a, ea, eb}, {b, eb, ea}} {
		if err := p.e.qp.Modify(&uverbs.QPAttr{State: uverbs.QPReset}, uverbs.QPAttrState); err != nil {
			t.Fatalf("%s: reset the QP: %v", p.e.h, err)
		}
		if err := p.e.qp.ConnectRC(p.local, p.peer, &opts); err != nil {
			t.Fatalf("%s: %v", p.e.h, err)
		}
	}
}

// qpState is the state e's QP is in.
func (e *rcEnd) qpState(t *testing.T) uverbs.QPState {
	t.Helper()
	a, err := e.qp.Query(uverbs.QPAttrState)
	if err != nil {
		t.Fatalf("%s: query the QP: %v", e.h, err)
	}
	return a.State
}
