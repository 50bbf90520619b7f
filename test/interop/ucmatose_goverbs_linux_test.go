package interop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// goverbs' rdmacm (Dial, Listen) against rdma-core's ucmatose
// (librdmacm/examples/cmatose.c, rdmacm-utils), RC in RDMA_PS_TCP on port
// 7471, both roles, over 4 connections at once (-c 4), each carrying 10
// SENDs of 100 bytes each way (-C 10 -S 100). ucmatose posts its 10
// receives before it connects or accepts, and its client connects with
// rnr_retry_count 0, so goverbs posts its own in Config.Setup as well. The
// server, once all 4 are ESTABLISHED, sends 10 on each, waits for their
// completions, then for 10 receives on each, and disconnects; the client
// waits for 10 receives on each, sends 10 back, and waits to be
// disconnected. ucmatose's messages are uninitialised memory: only their
// lengths are checked. It prints "data transfers complete" and "return
// status 0", and exits 0, when all went well.

const (
	ucmatoseBin   = "/usr/bin/ucmatose"
	ucmatoseConns = 4
	ucmatoseCount = 10
	ucmatoseSize  = 100
)

// ucmatoseArgs are the flags both roles share.
var ucmatoseArgs = []string{"-p", rdmaCMPort, "-c", fmt.Sprint(ucmatoseConns), "-C", fmt.Sprint(ucmatoseCount), "-S", fmt.Sprint(ucmatoseSize)}

// ucmMem is one connection's memory: ucmatoseCount receive slots of
// ucmatoseSize bytes at 128-byte strides (WRIDs 0 on), and the send
// payload at 2048 (WRIDs 100 on).
type ucmMem struct {
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

const ucmSendOff = 2048

// setup registers the memory on c's PD and posts the receives: the
// Config.Setup of both roles, before the connection is made.
func (m *ucmMem) setup(c *rdmacm.Conn) (err error) {
	if m.buf, err = uverbs.AllocBuffer(4096); err != nil {
		return err
	}
	if m.mr, err = c.PD().RegMR(m.buf.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return err
	}
	for i := range ucmatoseCount {
		sge, err := m.mr.SGE(i*128, ucmatoseSize)
		if err != nil {
			return err
		}
		if _, err := c.QP().PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{sge}}}); err != nil {
			return err
		}
	}
	return nil
}

// close deregisters and frees the memory; the MR goes before the Conn
// closes (the last Conn closes the shared PD). A second close does nothing.
func (m *ucmMem) close() {
	if m.mr != nil {
		m.mr.Close()
		m.mr = nil
	}
	if m.buf != nil {
		m.buf.Close()
		m.buf = nil
	}
}

// sendAll posts ucmatoseCount signaled SENDs of ucmatoseSize bytes.
func (m *ucmMem) sendAll(t *testing.T, c *rdmacm.Conn) {
	t.Helper()
	sge, err := m.mr.SGE(ucmSendOff, ucmatoseSize)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ucmatoseCount {
		wr := uverbs.SendWR{WRID: uint64(100 + i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge}}
		if _, err := c.QP().PostSend([]uverbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
}

// pollCounts polls c's CQ, which sends and receives share (in any order),
// for exactly sends send and recvs receive completions, each successful
// and each receive of ucmatoseSize bytes, for at most 30 s.
func pollCounts(t *testing.T, c *rdmacm.Conn, sends, recvs int) {
	t.Helper()
	wcs := make([]cq.WC, sends+recvs)
	sent, got := 0, 0
	deadline := time.Now().Add(30 * time.Second)
	for sent+got < sends+recvs {
		n, err := c.CQ().Poll(wcs[:sends+recvs-sent-got]) // never one more than due
		if err != nil {
			t.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			switch {
			case wc.Status != cq.Success:
				t.Fatalf("completion %+v", wc)
			case wc.WRID < 100 && wc.Opcode == cq.OpRecv && wc.ByteLen == ucmatoseSize:
				got++
			case wc.WRID >= 100 && wc.Opcode == cq.OpSend:
				sent++
			default:
				t.Fatalf("completion %+v: want a SEND, or a receive of %d bytes", wc, ucmatoseSize)
			}
		}
		if n == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d send and %d receive completions in 30 s, want %d and %d", sent, got, sends, recvs)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if sent != sends || got != recvs {
		t.Fatalf("%d send and %d receive completions, want %d and %d", sent, got, sends, recvs)
	}
}

// closeConn closes m's memory, then c, reporting Close's error.
func closeConn(t *testing.T, c *rdmacm.Conn, m *ucmMem) {
	t.Helper()
	m.close()
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

// TestUcmatoseServerGoverbsClient: rdma-core's ucmatose server, 4
// goverbs Dial clients, over IPv4 and IPv6.
func TestUcmatoseServerGoverbsClient(t *testing.T) {
	for _, ip := range []string{rxeAddr, rxeAddr6} {
		t.Run(ip, func(t *testing.T) { ucmatoseServerGoverbsClient(t, ip) })
	}
}

func ucmatoseServerGoverbsClient(t *testing.T, ip string) {
	env := requireRDMACM(t, ucmatoseBin)
	out, done, _ := startCmd(t, env, append([]string{ucmatoseBin, "-b", ip}, ucmatoseArgs...))
	addr := net.JoinHostPort(ip, rdmaCMPort)
	t.Logf("goverbs: %d × rdmacm.Dial(ctx, %q, cfg), then on each %d receives, %d sends, and ucmatose's disconnect",
		ucmatoseConns, addr, ucmatoseCount, ucmatoseCount)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conns := make([]*rdmacm.Conn, ucmatoseConns)
	mems := make([]*ucmMem, ucmatoseConns)
	for k := range conns {
		for i := 0; ; i++ { // until ucmatose listens: refused (reason 8) before
			m := new(ucmMem)
			cfg := &rdmacm.Config{Cap: uverbs.QPCap{MaxSendWR: ucmatoseCount, MaxRecvWR: ucmatoseCount}, Setup: m.setup}
			c, err := rdmacm.Dial(ctx, addr, cfg)
			if err == nil {
				conns[k], mems[k] = c, m
				t.Cleanup(func() { m.close(); c.Close() })
				if i > 0 {
					t.Logf("dial %d got through at attempt %d", k, i+1)
				}
				break
			}
			m.close()
			if !errors.Is(err, syscall.ECONNREFUSED) || i == 100 {
				t.Fatalf("dial %d (attempt %d): %v\nucmatose:\n%s", k, i+1, err, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for k, c := range conns {
		pollCounts(t, c, 0, ucmatoseCount)
		mems[k].sendAll(t, c)
		pollCounts(t, c, ucmatoseCount, 0)
	}
	awaitExit(t, "ucmatose", done, out)
	for k, c := range conns {
		select {
		case <-c.Disconnected():
		case <-time.After(10 * time.Second):
			t.Errorf("ucmatose's disconnect did not reach connection %d", k)
		}
		closeConn(t, c, mems[k])
	}
}

// TestGoverbsServerUcmatoseClient: a goverbs Listener accepting 4
// connections from rdma-core's ucmatose client, over IPv4 and IPv6.
func TestGoverbsServerUcmatoseClient(t *testing.T) {
	for _, ip := range []string{rxeAddr, rxeAddr6} {
		t.Run(ip, func(t *testing.T) { goverbsServerUcmatoseClient(t, ip) })
	}
}

func goverbsServerUcmatoseClient(t *testing.T, ip string) {
	env := requireRDMACM(t, ucmatoseBin)
	addr := net.JoinHostPort(ip, rdmaCMPort)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	mems := map[*rdmacm.Conn]*ucmMem{}
	cfg := &rdmacm.Config{
		Cap: uverbs.QPCap{MaxSendWR: ucmatoseCount, MaxRecvWR: ucmatoseCount},
		Setup: func(c *rdmacm.Conn) error {
			m := new(ucmMem)
			mu.Lock()
			mems[c] = m
			mu.Unlock()
			return m.setup(c)
		},
	}
	defer func() { // after a failure, and for a connection Setup began but Accept did not finish
		for _, m := range mems {
			m.close()
		}
	}()
	t.Logf("goverbs: rdmacm.Listen(ctx, %q, cfg), %d × Accept, then on each %d sends, %d receives, and Close",
		addr, ucmatoseConns, ucmatoseCount, ucmatoseCount)
	l, err := rdmacm.Listen(ctx, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out, done, _ := startCmd(t, env, append([]string{ucmatoseBin, "-s", ip}, ucmatoseArgs...))
	conns := make([]*rdmacm.Conn, ucmatoseConns)
	for k := range conns {
		c, err := l.Accept(ctx)
		if err != nil {
			t.Fatalf("accept %d: %v\nucmatose:\n%s", k, err, out)
		}
		conns[k] = c
		t.Cleanup(func() { c.Close() }) // after the deferred m.close
	}
	for _, c := range conns {
		mems[c].sendAll(t, c)
	}
	for _, c := range conns {
		pollCounts(t, c, ucmatoseCount, ucmatoseCount)
	}
	for _, c := range conns {
		closeConn(t, c, mems[c])
	}
	awaitExit(t, "ucmatose", done, out)
}
