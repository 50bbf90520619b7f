package rdmacm

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

// udUDPQKey is the Q_Key the kernel gives both sides in RDMA_PS_UDP
// (RDMA_UDP_QKEY, drivers/infiniband/core/cma.c).
const udUDPQKey = 0x01234567

// udMsg is the datagram payload the UD tests send.
const udMsg = 100

// udBuf is a UDConn's registered memory: udSlots receive slots of
// uverbs.UDRecvSize(udMsg) bytes each (GRH, then payload) every 256
// bytes, and a send area at udSend.
type udBuf struct {
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

const (
	udSlots = 8
	udSend  = 2048
)

// setup registers the memory on u's PD and posts every receive slot: the
// Config.SetupUD of the UD tests.
func (b *udBuf) setup(u *UDConn) (err error) {
	if b.buf, err = uverbs.AllocBuffer(4096); err != nil {
		return err
	}
	if b.mr, err = u.PD().RegMR(b.buf.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return err
	}
	for i := range udSlots {
		if err := b.postRecv(u, i); err != nil {
			return err
		}
	}
	return nil
}

func (b *udBuf) postRecv(u *UDConn, slot int) error {
	sge, err := b.mr.SGE(slot*256, uverbs.UDRecvSize(udMsg))
	if err != nil {
		return err
	}
	_, err = u.QP().PostRecv([]uverbs.RecvWR{{WRID: uint64(slot), SGL: []uverbs.SGE{sge}}})
	return err
}

func (b *udBuf) close() {
	if b.mr != nil {
		b.mr.Close()
	}
	if b.buf != nil {
		b.buf.Close()
	}
}

// send sends msg (at most udMsg bytes) to p, with u's QP number as the
// immediate data (as udaddy does), signaled, and waits for its completion.
func (b *udBuf) send(t *testing.T, u *UDConn, p UDPeer, msg []byte) {
	t.Helper()
	copy(b.buf.Bytes()[udSend:], msg)
	sge, err := b.mr.SGE(udSend, len(msg))
	if err != nil {
		t.Fatal(err)
	}
	wr := uverbs.SendWR{WRID: 1000, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, Imm: u.QP().QPN(),
		SGL: []uverbs.SGE{sge}, AH: p.AH, RemoteQPN: p.QPN, RemoteQKey: p.QKey}
	if _, err := u.QP().PostSend([]uverbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	wc := poll(t, u.c, 1)[0]
	if wc.Status != cq.Success || wc.WRID != 1000 {
		t.Fatalf("send completion %+v", wc)
	}
}

// recv waits for one datagram and returns its completion and its slot's
// bytes (GRH, then payload).
func (b *udBuf) recv(t *testing.T, u *UDConn) (cq.WC, []byte) {
	t.Helper()
	wc := poll(t, u.c, 1)[0]
	if wc.Status != cq.Success || wc.Opcode != cq.OpRecv || wc.WRID >= udSlots {
		t.Fatalf("receive completion %+v", wc)
	}
	slot := b.buf.Bytes()[int(wc.WRID)*256:][:uverbs.UDRecvSize(udMsg)]
	return wc, slot
}

// udPair listens in RDMA_PS_UDP on testAddr(n) and dials it; the
// UDConns and their memory are closed when the test ends. lcfg and dcfg
// may carry private data; their SetupUD is set here.
func udPair(t *testing.T, n int, lcfg, dcfg *Config) (cli, srv *UDConn, cb, sb *udBuf) {
	t.Helper()
	return udPairAt(t, testAddr(n), lcfg, dcfg)
}

// udPairAt is udPair on an address of the caller's.
func udPairAt(t *testing.T, addr string, lcfg, dcfg *Config) (cli, srv *UDConn, cb, sb *udBuf) {
	t.Helper()
	cb, sb = new(udBuf), new(udBuf)
	if lcfg == nil {
		lcfg = new(Config)
	}
	if dcfg == nil {
		dcfg = new(Config)
	}
	lcfg.SetupUD, dcfg.SetupUD = sb.setup, cb.setup
	t.Cleanup(cb.close) // after the UDConns' Close (cleanups run last first)
	t.Cleanup(sb.close)
	l, err := ListenUD(timeout(t), addr, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	type res struct {
		u   *UDConn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		u, err := l.Accept(timeout(t))
		acc <- res{u, err}
	}()
	cli, err = DialUD(timeout(t), l.Addr().String(), dcfg)
	if err != nil {
		t.Fatalf("dial ud %v: %v", l.Addr(), err)
	}
	r := <-acc
	if r.err != nil {
		cli.Close()
		t.Fatalf("accept ud: %v", r.err)
	}
	srv = r.u
	t.Cleanup(func() {
		cb.mr.Close() // before the PD's last user goes
		sb.mr.Close()
		cb.mr, sb.mr = nil, nil
		if err := cli.Close(); err != nil {
			t.Errorf("close client: %v", err)
		}
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return cli, srv, cb, sb
}

// TestUDLoopback: DialUD and ListenUD over rxe0, datagrams both ways:
// the client sends to the peer its ESTABLISHED named (remote QPN, Q_Key,
// AH), the server answers the sender its first datagram names (ReplyTo).
func TestUDLoopback(t *testing.T) {
	requireCM(t)
	cli, srv, cb, sb := udPair(t, 40, nil, nil)
	udPingPong(t, cli, srv, cb, sb)
}

// udPingPong checks a UD pair and sends a datagram each way.
func udPingPong(t *testing.T, cli, srv *UDConn, cb, sb *udBuf) {
	t.Helper()
	if cli.QP().Type() != uverbs.UD || srv.QP().Type() != uverbs.UD {
		t.Fatalf("QP types %v and %v, want UD", cli.QP().Type(), srv.QP().Type())
	}
	p := cli.Peer()
	t.Logf("client QPN %#x, server QPN %#x; client's peer %+v (AH attr from the event)", cli.QP().QPN(), srv.QP().QPN(), p)
	if p.QPN != srv.QP().QPN() || p.QKey != udUDPQKey || p.AH == nil {
		t.Fatalf("peer %+v, want QPN %#x, Q_Key %#x and an AH", p, srv.QP().QPN(), udUDPQKey)
	}
	if cli.QKey() != udUDPQKey || srv.QKey() != udUDPQKey {
		t.Errorf("Q_Keys %#x and %#x, want %#x", cli.QKey(), srv.QKey(), udUDPQKey)
	}
	if srv.Peer() != (UDPeer{}) {
		t.Errorf("the accepted UDConn's Peer is %+v, want none", srv.Peer())
	}
	if cli.RemoteAddr() != srv.LocalAddr() || srv.RemoteAddr() != cli.LocalAddr() {
		t.Errorf("addresses: client %v -> %v, server %v -> %v", cli.LocalAddr(), cli.RemoteAddr(), srv.LocalAddr(), srv.RemoteAddr())
	}

	ping := bytes.Repeat([]byte("ping"), udMsg/4)
	cb.send(t, cli, p, ping)
	wc, slot := sb.recv(t, srv)
	if wc.ByteLen != uint32(uverbs.UDRecvSize(udMsg)) || wc.SrcQP != cli.QP().QPN() || wc.Flags&cq.WithImm == 0 || wc.Imm != cli.QP().QPN() {
		t.Errorf("server's receive %+v: want %d bytes (GRH and payload) from QPN %#x with its QPN as immediate", wc, uverbs.UDRecvSize(udMsg), cli.QP().QPN())
	}
	if !bytes.Equal(slot[uverbs.GRHSize:], ping) {
		t.Errorf("server received %q", slot[uverbs.GRHSize:])
	}
	g, err := uverbs.ParseGRH(slot)
	if err != nil {
		t.Fatal(err)
	}
	if g.Src() != cli.LocalAddr().Addr() {
		t.Errorf("GRH source %v, want %v", g.Src(), cli.LocalAddr().Addr())
	}
	back, err := srv.ReplyTo(wc, slot)
	if err != nil {
		t.Fatal(err)
	}
	defer back.AH.Close()
	if back.QPN != cli.QP().QPN() || back.QKey != udUDPQKey {
		t.Errorf("reply peer %+v, want QPN %#x", back, cli.QP().QPN())
	}
	pong := bytes.Repeat([]byte("pong"), udMsg/4)
	sb.send(t, srv, back, pong)
	wc, slot = cb.recv(t, cli)
	if wc.SrcQP != srv.QP().QPN() || !bytes.Equal(slot[uverbs.GRHSize:], pong) {
		t.Errorf("client's receive %+v: %q", wc, slot[uverbs.GRHSize:])
	}
}

// TestUDPrivateData: the SIDR request carries 180 bytes of private data,
// the reply 136 (rdmacm-facts.md); one byte more is EINVAL before
// anything is sent.
func TestUDPrivateData(t *testing.T) {
	requireCM(t)
	req := bytes.Repeat([]byte{0xa5}, MaxConnectPrivateDataUD)
	rep := bytes.Repeat([]byte{0x5a}, MaxAcceptPrivateDataUD)
	cli, srv, _, _ := udPair(t, 41, &Config{PrivateData: rep}, &Config{PrivateData: req})
	if got := srv.PrivateData(); len(got) < len(req) || !bytes.Equal(got[:len(req)], req) {
		t.Errorf("the server got request private data %x (%d bytes), want %d bytes of a5", got, len(got), len(req))
	}
	if got := cli.PrivateData(); len(got) < len(rep) || !bytes.Equal(got[:len(rep)], rep) {
		t.Errorf("the client got reply private data %x (%d bytes), want %d bytes of 5a", got, len(got), len(rep))
	}
	t.Logf("received: request %d bytes, reply %d bytes", len(srv.PrivateData()), len(cli.PrivateData()))

	_, err := DialUD(timeout(t), testAddr(41), &Config{PrivateData: make([]byte, MaxConnectPrivateDataUD+1)})
	t.Logf("181 bytes: %v", err)
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("DialUD with %d bytes of private data: %v, want EINVAL", MaxConnectPrivateDataUD+1, err)
	}
	_, err = ListenUD(timeout(t), testAddr(42), &Config{PrivateData: make([]byte, MaxAcceptPrivateDataUD+1)})
	t.Logf("137 bytes: %v", err)
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("ListenUD with %d bytes of private data: %v, want EINVAL", MaxAcceptPrivateDataUD+1, err)
	}
}

// TestUDNoListener: a SIDR request to a port nobody listens on is
// answered UNREACHABLE (rdmacm-facts.md), a *SIDRError.
func TestUDNoListener(t *testing.T) {
	requireCM(t)
	_, err := DialUD(timeout(t), testAddr(43), nil)
	t.Logf("DialUD to nobody: %v", err)
	var se *SIDRError
	if !errors.As(err, &se) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("DialUD to a port nobody listens on: %v, want a *SIDRError (ECONNREFUSED)", err)
	}
	if se.Status != SIDRUnsupported {
		t.Errorf("SIDR status %d, want %d", se.Status, SIDRUnsupported)
	}
}

// TestUDReject: Request.Reject on a UD request reaches DialUD as a
// *SIDRError with status 2; AcceptUD refuses 137 bytes of private data,
// and Accept a UD request.
func TestUDReject(t *testing.T) {
	requireCM(t)
	l, err := ListenUD(timeout(t), testAddr(44), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		r, err := l.AcceptRequest(timeout(t))
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := r.Accept(timeout(t), nil); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Accept of a UD request: %v, want EINVAL", err)
		}
		if _, err := r.AcceptUD(timeout(t), &Config{PrivateData: make([]byte, MaxAcceptPrivateDataUD+1)}); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("AcceptUD with %d bytes: %v, want EINVAL", MaxAcceptPrivateDataUD+1, err)
		}
		r2, err := l.AcceptRequest(timeout(t))
		if err != nil {
			t.Error(err)
			return
		}
		if err := r2.Reject([]byte("no")); err != nil {
			t.Error(err)
		}
	}()
	for i := range 2 {
		_, err := DialUD(timeout(t), l.Addr().String(), nil)
		t.Logf("DialUD %d: %v", i, err)
		var se *SIDRError
		if !errors.As(err, &se) || se.Status != SIDRReject || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("DialUD %d to a rejecting listener: %v, want a *SIDRError with status %d", i, err, SIDRReject)
		}
	}
}
