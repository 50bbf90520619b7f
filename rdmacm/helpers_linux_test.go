package rdmacm

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/internal/ucma"
	"github.com/goverbs/goverbs/uverbs"
)

// The device tests run on the VM harness's soft-RoCE device: rxe0 on a
// dummy netdev with 192.0.2.1/24, rdma_ucm loaded. Outside the VM they
// skip; inside it a missing device fails.

// rxeIP is the harness's address on rxe0's netdev.
var rxeIP = netip.MustParseAddr("192.0.2.1")

// stepWait bounds each step of a test; TCG is slow, the CM is not.
const stepWait = 30 * time.Second

// requireCM fails in the VM (skips outside) without the uverbs and
// rdma_cm devices.
func requireCM(t testing.TB) {
	t.Helper()
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.RequireDevice(t, ucma.DevicePath)
}

// testPort is a port of the test's own, so that runs on one machine do
// not meet.
func testPort(n int) uint16 { return uint16(20000 + (os.Getpid()*16+n)%20000) }

func testAddr(n int) string { return netip.AddrPortFrom(rxeIP, testPort(n)).String() }

// timeout returns a context that ends after stepWait.
func timeout(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), stepWait)
	t.Cleanup(cancel)
	return ctx
}

// listen listens on testAddr(n), closing the listener when the test ends.
func listen(t testing.TB, n int, cfg *Config) *Listener {
	t.Helper()
	l, err := Listen(timeout(t), testAddr(n), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// pair dials l and accepts the connection, both closed when the test ends.
func pair(t testing.TB, l *Listener, dcfg *Config) (cli, srv *Conn) {
	t.Helper()
	return pairAt(t, l, l.Addr().String(), dcfg)
}

// pairAt is pair, dialing addr (which reaches l) rather than l's own
// address.
func pairAt(t testing.TB, l *Listener, addr string, dcfg *Config) (cli, srv *Conn) {
	t.Helper()
	cli, srv = dialAcceptAt(t, l, addr, dcfg)
	t.Cleanup(func() { cli.Close() })
	t.Cleanup(func() { srv.Close() })
	return cli, srv
}

// dialAccept dials l and accepts the connection, for the caller to close.
func dialAccept(t testing.TB, l *Listener, dcfg *Config) (cli, srv *Conn) {
	t.Helper()
	return dialAcceptAt(t, l, l.Addr().String(), dcfg)
}

// dialAcceptAt is dialAccept, dialing addr.
func dialAcceptAt(t testing.TB, l *Listener, addr string, dcfg *Config) (cli, srv *Conn) {
	t.Helper()
	type res struct {
		c   *Conn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		c, err := l.Accept(timeout(t))
		acc <- res{c, err}
	}()
	cli, err := Dial(timeout(t), addr, dcfg)
	if err != nil {
		t.Fatalf("dial %v: %v", addr, err)
	}
	r := <-acc
	if r.err != nil {
		cli.Close()
		t.Fatalf("accept: %v", r.err)
	}
	return cli, r.c
}

// buffer is registered memory on a Conn's PD.
type buffer struct {
	mem []byte
	mr  *uverbs.MR
}

func newBuffer(t testing.TB, c *Conn, n int) *buffer {
	t.Helper()
	b, err := uverbs.AllocBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := c.PD().RegMR(b.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	// Registered after the Conns' own cleanups, so these run first: MRs
	// before the PD's last user closes it.
	t.Cleanup(func() { mr.Close(); b.Close() })
	return &buffer{mem: b.Bytes(), mr: mr}
}

func (b *buffer) sge(t testing.TB, off, n int) uverbs.SGE {
	t.Helper()
	s, err := b.mr.SGE(off, n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// poll polls c's CQ until it has n completions or stepWait passes.
func poll(t testing.TB, c *Conn, n int) []cq.WC {
	t.Helper()
	var out []cq.WC
	wcs := make([]cq.WC, 16)
	deadline := time.Now().Add(stepWait)
	for len(out) < n {
		k, err := c.CQ().Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, wcs[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d completions of %d in %v", len(out), n, stepWait)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return out
}

// waitCounts waits up to stepWait for rxe0's resource counts to be want
// (the kernel destroys a CM id's state asynchronously).
func waitCounts(t testing.TB, want map[string]uint64) {
	t.Helper()
	deadline := time.Now().Add(stepWait)
	for {
		got := rdmatest.RXECounts(t)
		diff := ""
		for k, v := range want {
			if got[k] != v {
				diff += fmt.Sprintf(" %s %d (want %d)", k, got[k], v)
			}
		}
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rxe0's resources not back to the baseline:%s", diff)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
