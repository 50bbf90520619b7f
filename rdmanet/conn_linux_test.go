package rdmanet_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/ucma"
	"github.com/goverbs/goverbs/rdmanet"
)

// The tests run on the VM harness's soft-RoCE device: rxe0 on a dummy
// netdev with 192.0.2.1/24, rdma_ucm loaded. Outside the VM they skip;
// inside it a missing device fails.

var rxeIP = netip.MustParseAddr("192.0.2.1")

func requireCM(t testing.TB) {
	t.Helper()
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.RequireDevice(t, ucma.DevicePath)
}

// listen listens on a free port of rxe0's address, closing the listener
// when the test ends.
func listen(t testing.TB, lc *rdmanet.ListenConfig) net.Listener {
	t.Helper()
	if lc == nil {
		lc = &rdmanet.ListenConfig{}
	}
	l, err := lc.Listen(t.Context(), "rdma", netip.AddrPortFrom(rxeIP, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// pair dials l and accepts the connection: the client's end, then the
// server's.
func pair(t testing.TB, l net.Listener, d *rdmanet.Dialer) (net.Conn, net.Conn) {
	t.Helper()
	if d == nil {
		d = &rdmanet.Dialer{}
	}
	type result struct {
		c   net.Conn
		err error
	}
	acc := make(chan result, 1)
	go func() {
		c, err := l.Accept()
		acc <- result{c, err}
	}()
	cli, err := d.DialContext(t.Context(), "rdma", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-acc
	if r.err != nil {
		cli.Close()
		t.Fatal(r.err)
	}
	return cli, r.c
}

// TestConn is x/net's nettest.TestConn, the standard test of net.Conn
// semantics: basic I/O, ping-pong, racing reads and writes, every kind of
// deadline, Close unblocking, concurrent methods.
func TestConn(t *testing.T) {
	requireCM(t)
	l := listen(t, nil)
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		c1, c2 = pair(t, l, nil)
		return c1, c2, func() { c1.Close(); c2.Close() }, nil
	})
}

// Bytes written in random sizes arrive whole and in order, read in
// random sizes, both ways at once; CloseWrite ends each direction with
// io.EOF after its bytes.
func TestStreamRandomSizes(t *testing.T) {
	requireCM(t)
	l := listen(t, nil)
	cli, srv := pair(t, l, &rdmanet.Dialer{Config: rdmanet.Config{BufferSize: 4096, ReadBuffers: 4, WriteBuffers: 3}})
	defer cli.Close()
	defer srv.Close()
	const total = 8 << 20
	var wg sync.WaitGroup
	send := func(c net.Conn, seed uint64, sum *[32]byte) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 1))
		h := sha256.New()
		buf := make([]byte, 1<<20)
		for left := total; left > 0; {
			n := min(left, 1+r.IntN(256<<10))
			for i := range buf[:n] {
				buf[i] = byte(r.Uint32())
			}
			h.Write(buf[:n])
			if _, err := c.Write(buf[:n]); err != nil {
				t.Error(err)
				return
			}
			left -= n
		}
		if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Error(err)
		}
		h.Sum(sum[:0])
	}
	recv := func(c net.Conn, seed uint64, sum *[32]byte, n *int) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 2))
		h := sha256.New()
		buf := make([]byte, 1<<20)
		for {
			k, err := c.Read(buf[:1+r.IntN(len(buf))])
			h.Write(buf[:k])
			*n += k
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
		h.Sum(sum[:0])
	}
	var sent, got [2][32]byte
	var n [2]int
	wg.Add(4)
	go send(cli, 1, &sent[0])
	go recv(srv, 1, &got[0], &n[0])
	go send(srv, 2, &sent[1])
	go recv(cli, 2, &got[1], &n[1])
	wg.Wait()
	for i := range 2 {
		if n[i] != total || sent[i] != got[i] {
			t.Errorf("direction %d: %d bytes of %d read, SHA-256 equal: %t", i, n[i], total, sent[i] == got[i])
		}
	}
}

// The peer's Close: the bytes it wrote first arrive, then io.EOF; a
// Write then fails with ECONNRESET (the peer disconnected), and Close
// returns net.ErrClosed the second time.
func TestPeerClose(t *testing.T) {
	requireCM(t)
	l := listen(t, nil)
	cli, srv := pair(t, l, nil)
	defer cli.Close()
	msg := []byte("last words")
	if _, err := srv.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close: %v, want net.ErrClosed", err)
	}
	if _, err := srv.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v, want net.ErrClosed", err)
	}
	got, err := io.ReadAll(cli)
	if err != nil || !bytes.Equal(got, msg) {
		t.Errorf("ReadAll = %q, %v; want %q", got, err, msg)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := cli.Write(msg)
		if errors.Is(err, syscall.ECONNRESET) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("Write to a closed peer: %v, want ECONNRESET", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A Read waiting past its deadline fails with a timeout, and the Conn
// goes on working after the deadline is cleared.
func TestReadDeadline(t *testing.T) {
	requireCM(t)
	l := listen(t, nil)
	cli, srv := pair(t, l, nil)
	defer cli.Close()
	defer srv.Close()
	cli.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := cli.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline: %v", err)
	}
	cli.SetReadDeadline(time.Time{})
	if _, err := srv.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cli, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}

// Dial's network must be "rdma", or a TCP one taken to mean it; Listen's
// "rdma"; a port nobody listens on is refused.
func TestDialErrors(t *testing.T) {
	requireCM(t)
	for _, nw := range []string{"udp", "unix", ""} {
		if _, err := rdmanet.Dial(nw, "192.0.2.1:1"); err == nil {
			t.Errorf("Dial on network %q succeeded", nw)
		}
	}
	if l, err := rdmanet.Listen("tcp", "192.0.2.1:0"); err == nil {
		l.Close()
		t.Error("Listen on network tcp succeeded")
	}
	for _, nw := range []string{"rdma", "tcp", "tcp4"} {
		if _, err := rdmanet.Dial(nw, netip.AddrPortFrom(rxeIP, 1).String()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("Dial(%q) to a port nobody listens on: %v, want ECONNREFUSED", nw, err)
		}
	}
	// An address without a port reads as net.Dial's: a *net.AddrError in
	// the *net.OpError, "dial" said once.
	_, err := rdmanet.Dial("rdma", "192.0.2.1")
	var ae *net.AddrError
	if !errors.As(err, &ae) || err.Error() != "dial rdma: address 192.0.2.1: missing port in address" {
		t.Errorf("Dial without a port: %v (%T), want net.Dial's message and a *net.AddrError", err, errors.Unwrap(err))
	}
}

// Read and Write allocate nothing in steady state, waits included: a
// 64-byte ping-pong, the echo on another goroutine, counted process-wide.
func TestReadWriteAllocs(t *testing.T) {
	requireCM(t)
	if testutil.Race {
		t.Skip("the race detector's instrumentation allocates")
	}
	l := listen(t, nil)
	cli, srv := pair(t, l, nil)
	defer cli.Close()
	defer srv.Close()
	go func() { // the echo, until the client closes
		b := make([]byte, 64)
		for {
			if _, err := io.ReadFull(srv, b); err != nil {
				return
			}
			if _, err := srv.Write(b); err != nil {
				return
			}
		}
	}()
	b := make([]byte, 64)
	var err error
	round := func() {
		if _, e := cli.Write(b); e != nil {
			err = e
		}
		if _, e := io.ReadFull(cli, b); e != nil {
			err = e
		}
	}
	for range 100 { // warm up: the runtime's caches, the timers
		round()
	}
	if n := testing.AllocsPerRun(500, round); n != 0 || err != nil {
		t.Errorf("a 64-byte round trip allocates %v times (%v)", n, err)
	}
}
