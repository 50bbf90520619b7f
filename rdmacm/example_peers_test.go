package rdmacm_test

import (
	"context"
	"log"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// The examples' other sides: each example shows one side of a connection
// and starts the other with one of these, on the address the VM tests'
// rxe0 has (192.0.2.1). On a host without such a device, TestMain leaves
// the examples to the VM.

// peer is one side's registered buffer and the completion it waits for.
type peer struct {
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

// register registers a 4 KiB buffer on pd.
func (p *peer) register(pd *uverbs.PD) (err error) {
	if p.buf, err = uverbs.AllocBuffer(4096); err != nil {
		return err
	}
	p.mr, err = pd.RegMR(p.buf.Bytes(), uverbs.AccessLocalWrite)
	return err
}

// postRecv posts one receive of n bytes on qp.
func (p *peer) postRecv(qp *uverbs.QP, n int) error {
	sge, err := p.mr.SGE(0, n)
	if err != nil {
		return err
	}
	_, err = qp.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{sge}}})
	return err
}

// awaitOne polls c until it has one completion.
func awaitOne(c *cq.CQ) {
	wcs := make([]cq.WC, 1)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		if n, err := c.Poll(wcs); n > 0 || err != nil {
			return
		}
	}
}

func (p *peer) close() {
	p.mr.Close()
	p.buf.Close()
}

// serveOne listens on a free port and accepts one connection, which it
// keeps until its first message came; it returns the address to dial.
func serveOne() string {
	var p peer
	cfg := &rdmacm.Config{Setup: func(c *rdmacm.Conn) error {
		if err := p.register(c.PD()); err != nil {
			return err
		}
		return p.postRecv(c.QP(), 4096)
	}}
	l, err := rdmacm.Listen(context.Background(), "192.0.2.1:0", cfg)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		defer l.Close()
		c, err := l.Accept(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		awaitOne(c.CQ())
		c.Close()
		p.close()
	}()
	return l.Addr().String()
}

// sendHello dials addr with "hello" in its private data and sends one
// message, "hello over RDMA".
func sendHello(addr string) {
	c, err := rdmacm.Dial(context.Background(), addr, &rdmacm.Config{PrivateData: []byte("hello")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var p peer
	if err := p.register(c.PD()); err != nil {
		log.Fatal(err)
	}
	defer p.close()
	sge, err := p.mr.SGE(0, copy(p.buf.Bytes(), "hello over RDMA"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.QP().PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge}}}); err != nil {
		log.Fatal(err)
	}
	awaitOne(c.CQ())
}

// serveOneUD listens for UD requests on a free port and answers one,
// keeping the UDConn until its first datagram came; it returns the
// address to dial.
func serveOneUD() string {
	var p peer
	cfg := &rdmacm.Config{SetupUD: func(u *rdmacm.UDConn) error {
		if err := p.register(u.PD()); err != nil {
			return err
		}
		return p.postRecv(u.QP(), uverbs.UDRecvSize(1024))
	}}
	l, err := rdmacm.ListenUD(context.Background(), "192.0.2.1:0", cfg)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		defer l.Close()
		u, err := l.Accept(context.Background())
		if err != nil {
			log.Fatal(err)
		}
		awaitOne(u.CQ())
		u.Close()
		p.close()
	}()
	return l.Addr().String()
}

// sendDatagram resolves addr's UD service and sends it "one datagram".
func sendDatagram(addr string) {
	u, err := rdmacm.DialUD(context.Background(), addr, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer u.Close()
	var p peer
	if err := p.register(u.PD()); err != nil {
		log.Fatal(err)
	}
	defer p.close()
	sge, err := p.mr.SGE(0, copy(p.buf.Bytes(), "one datagram"))
	if err != nil {
		log.Fatal(err)
	}
	d := u.Peer()
	wr := uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge},
		AH: d.AH, RemoteQPN: d.QPN, RemoteQKey: d.QKey}
	if _, err := u.QP().PostSend([]uverbs.SendWR{wr}); err != nil {
		log.Fatal(err)
	}
	awaitOne(u.CQ())
}
