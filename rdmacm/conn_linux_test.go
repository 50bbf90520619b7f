package rdmacm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// TestDialSendRecv: Dial and Accept over rxe0's own address, then a SEND
// each way, an RDMA WRITE into the server's buffer and an RDMA READ of it.
func TestDialSendRecv(t *testing.T) {
	requireCM(t)
	l := listen(t, 0, nil)
	cli, srv := pair(t, l, nil)
	if cli.RemoteAddr() != l.Addr() || srv.LocalAddr() != l.Addr() {
		t.Errorf("addresses: client's remote %v, server's local %v, listener %v", cli.RemoteAddr(), srv.LocalAddr(), l.Addr())
	}
	if srv.RemoteAddr() != cli.LocalAddr() || !cli.LocalAddr().IsValid() {
		t.Errorf("addresses: server's remote %v, client's local %v", srv.RemoteAddr(), cli.LocalAddr())
	}
	cb, sb := newBuffer(t, cli, 4096), newBuffer(t, srv, 4096)

	// SEND both ways.
	for _, dir := range []struct {
		name     string
		from, to *Conn
		fb, tb   *buffer
	}{{"client to server", cli, srv, cb, sb}, {"server to client", srv, cli, sb, cb}} {
		msg := []byte("hello over rdma_cm: " + dir.name)
		if _, err := dir.to.QP().PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{dir.tb.sge(t, 0, 256)}}}); err != nil {
			t.Fatal(err)
		}
		copy(dir.fb.mem[512:], msg)
		if _, err := dir.from.QP().PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{dir.fb.sge(t, 512, len(msg))}}}); err != nil {
			t.Fatal(err)
		}
		if wc := poll(t, dir.from, 1)[0]; wc.Status != cq.Success || wc.WRID != 2 {
			t.Fatalf("%s: send completion %+v", dir.name, wc)
		}
		wc := poll(t, dir.to, 1)[0]
		if wc.Status != cq.Success || wc.Opcode != cq.OpRecv || int(wc.ByteLen) != len(msg) {
			t.Fatalf("%s: receive completion %+v", dir.name, wc)
		}
		if got := dir.tb.mem[:len(msg)]; !bytes.Equal(got, msg) {
			t.Errorf("%s: received %q", dir.name, got)
		}
	}

	// RDMA WRITE into the server's buffer, then READ it back.
	data := []byte("written by RDMA WRITE, read by RDMA READ")
	copy(cb.mem[1024:], data)
	if _, err := cli.QP().PostSend([]uverbs.SendWR{{WRID: 3, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{cb.sge(t, 1024, len(data))}, RemoteAddr: sb.mr.Addr() + 2048, RKey: sb.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, cli, 1)[0]; wc.Status != cq.Success {
		t.Fatalf("write completion %+v", wc)
	}
	if got := sb.mem[2048 : 2048+len(data)]; !bytes.Equal(got, data) {
		t.Errorf("server's buffer after the write: %q", got)
	}
	if _, err := cli.QP().PostSend([]uverbs.SendWR{{WRID: 4, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{cb.sge(t, 3072, len(data))}, RemoteAddr: sb.mr.Addr() + 2048, RKey: sb.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, cli, 1)[0]; wc.Status != cq.Success || wc.Opcode != cq.OpRDMARead {
		t.Fatalf("read completion %+v", wc)
	}
	if got := cb.mem[3072 : 3072+len(data)]; !bytes.Equal(got, data) {
		t.Errorf("read back %q", got)
	}
}

// TestDialNoListener: a port nobody listens on is refused at once
// (REJECTED, reason 8).
func TestDialNoListener(t *testing.T) {
	requireCM(t)
	start := time.Now()
	_, err := Dial(timeout(t), testAddr(1), nil)
	var rej *RejectError
	if !errors.As(err, &rej) || rej.Reason != RejectInvalidServiceID || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to no listener: %v, want a RejectError with reason 8", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refused after %v", d)
	}
	t.Logf("%v (after %v)", err, time.Since(start))
}

// TestDialCancelled: an ended context returns at once, touching nothing.
func TestDialCancelled(t *testing.T) {
	requireCM(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Dial(ctx, testAddr(2), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("dial with a cancelled context: %v", err)
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	_, err := Dial(dctx, testAddr(2), nil)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("dial past its deadline: %v", err)
	}
}

// TestPrivateData: private data at each message's limit goes through
// both ways; a byte more is refused before anything is sent.
func TestPrivateData(t *testing.T) {
	requireCM(t)
	fill := func(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }
	l := listen(t, 3, &Config{PrivateData: fill(MaxAcceptPrivateData, 'a')})
	cli, srv := pair(t, l, &Config{PrivateData: fill(MaxConnectPrivateDataTCP, 'c')})
	if got := srv.PrivateData(); !bytes.Equal(got, fill(MaxConnectPrivateDataTCP, 'c')) {
		t.Errorf("server got %d bytes %q", len(got), got)
	}
	if got := cli.PrivateData(); !bytes.Equal(got, fill(MaxAcceptPrivateData, 'a')) {
		t.Errorf("client got %d bytes %q", len(got), got)
	}
	_, err := Dial(timeout(t), l.Addr().String(), &Config{PrivateData: fill(MaxConnectPrivateDataTCP+1, 'c')})
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("dial with 57 bytes: %v, want EINVAL", err)
	}
	t.Log(err)
	if _, err := Listen(timeout(t), testAddr(4), &Config{PrivateData: fill(MaxAcceptPrivateData+1, 'a')}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("listen with 197 bytes to accept with: %v, want EINVAL", err)
	}
}

// TestReject: a request looked at and rejected with private data; the
// dialer's error carries the reason and the data.
func TestReject(t *testing.T) {
	requireCM(t)
	l := listen(t, 5, nil)
	done := make(chan error, 1)
	go func() {
		r, err := l.AcceptRequest(timeout(t))
		if err != nil {
			done <- err
			return
		}
		if !bytes.HasPrefix(r.PrivateData(), []byte("let me in")) {
			done <- errors.New("request's private data: " + string(r.PrivateData()))
			return
		}
		if err := r.Reject(bytes.Repeat([]byte{'x'}, MaxRejectPrivateData+1)); !errors.Is(err, syscall.EINVAL) {
			done <- errors.New("reject with 149 bytes did not fail")
			return
		}
		done <- r.Reject(bytes.Repeat([]byte{'n'}, MaxRejectPrivateData))
	}()
	_, err := Dial(timeout(t), l.Addr().String(), &Config{PrivateData: []byte("let me in")})
	if serr := <-done; serr != nil {
		t.Fatal(serr)
	}
	var rej *RejectError
	if !errors.As(err, &rej) || rej.Reason != RejectConsumerDefined {
		t.Fatalf("dial: %v, want a RejectError with reason 28", err)
	}
	if !bytes.Equal(rej.PrivateData, bytes.Repeat([]byte{'n'}, MaxRejectPrivateData)) {
		t.Errorf("reject's private data: %d bytes %q", len(rej.PrivateData), rej.PrivateData)
	}
}

// TestCloseWakesAccept: Close ends an Accept that waits, with ErrClosed.
func TestCloseWakesAccept(t *testing.T) {
	requireCM(t)
	l, err := Listen(timeout(t), testAddr(6), nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := l.Accept(context.Background())
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("accept after close: %v", err)
		}
	case <-time.After(stepWait):
		t.Fatal("Close did not wake Accept")
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second close: %v", err)
	}
}

// TestPeerClose: the client's Close reaches the server, whose posted
// receives flush exactly once, and whose Disconnected closes.
func TestPeerClose(t *testing.T) {
	requireCM(t)
	l := listen(t, 7, nil)
	cli, srv := pair(t, l, nil)
	sb := newBuffer(t, srv, 4096)
	const posted = 4
	for i := range posted {
		if _, err := srv.QP().PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{sb.sge(t, i*64, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("client's Close took %v", time.Since(start))
	select {
	case <-srv.Disconnected():
	case <-time.After(stepWait):
		t.Fatal("the server never saw the disconnect")
	}
	wcs := poll(t, srv, posted)
	for _, wc := range wcs {
		if wc.Status != cq.WRFlushErr {
			t.Errorf("receive %d: %v, want a flush", wc.WRID, wc.Status)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n, err := srv.CQ().Poll(make([]cq.WC, 4)); n != 0 || err != nil {
		t.Errorf("%d completions more after the flush (%v)", n, err)
	}
	if err := cli.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second close: %v", err)
	}
}

// TestManyConnections opens and closes 200 connections one after the
// other and finds the fds and rxe0's kernel objects back where they were.
func TestManyConnections(t *testing.T) {
	requireCM(t)
	l := listen(t, 8, nil)
	// One connection first, so that the shared device is open for the
	// baseline as it is in the loop.
	c0, s0 := pair(t, l, nil)
	_, _ = c0, s0
	fds := testutil.OpenFDs(t)
	base := rdmatest.RXECounts(t)
	start := time.Now()
	const n = 200
	for i := range n {
		c, s := dialAccept(t, l, nil)
		if err := c.Close(); err != nil {
			t.Fatalf("connection %d: client close: %v", i, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("connection %d: server close: %v", i, err)
		}
	}
	t.Logf("%d connections in %v (%v each)", n, time.Since(start), time.Since(start)/n)
	waitCounts(t, base)
	if got := testutil.OpenFDs(t); got != fds {
		t.Errorf("%d fds open, %d before", got, fds)
	}
}
