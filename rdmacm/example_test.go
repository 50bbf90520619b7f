package rdmacm_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// ExampleDial connects to a server by address and port and sends it one
// message with SEND. Its server here is ExampleListener_AcceptRequest's,
// started by serveOne.
func ExampleDial() {
	addr := serveOne() // "192.0.2.1:port"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := rdmacm.Dial(ctx, addr, &rdmacm.Config{PrivateData: []byte("hello")})
	if err != nil {
		log.Fatal(err) // a *rdmacm.RejectError if the server refused
	}
	defer conn.Close()
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mr, err := conn.PD().RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close() // before conn.Close, deferred earlier
	msg := copy(buf.Bytes(), "hello over RDMA")
	sge, err := mr.SGE(0, msg)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := conn.QP().PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge}}}); err != nil {
		log.Fatal(err)
	}
	wcs := make([]cq.WC, 1)
	for n := 0; n == 0; {
		if n, err = conn.CQ().Poll(wcs); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("sent:", wcs[0].Status)
	// Output:
	// sent: success
}

// ExampleListener_AcceptRequest looks at a request's private data
// before answering it, and posts a receive before the peer can send. Its
// client here is ExampleDial's, started by sendHello.
func ExampleListener_AcceptRequest() {
	ctx := context.Background()
	var (
		buf *uverbs.Buffer
		mr  *uverbs.MR
	)
	cfg := &rdmacm.Config{
		PrivateData: []byte("welcome"),
		Setup: func(c *rdmacm.Conn) (err error) { // the QP exists, not yet connected
			if buf, err = uverbs.AllocBuffer(4096); err != nil {
				return err
			}
			if mr, err = c.PD().RegMR(buf.Bytes(), uverbs.AccessLocalWrite); err != nil {
				return err
			}
			sge, err := mr.SGE(0, 4096)
			if err != nil {
				return err
			}
			_, err = c.QP().PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{sge}}})
			return err
		},
	}
	l, err := rdmacm.Listen(ctx, "192.0.2.1:0", cfg) // port 0: any free one
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	go sendHello(l.Addr().String())
	req, err := l.AcceptRequest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if string(req.PrivateData()[:5]) != "hello" {
		req.Reject([]byte("say hello"))
		return
	}
	conn, err := req.Accept(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	// Wait for the message: arm, poll, wait, as package cq says.
	wcs := make([]cq.WC, 1)
	for {
		if err := conn.CQ().ReqNotify(cq.NextCompletion); err != nil {
			log.Fatal(err)
		}
		if n, _ := conn.CQ().Poll(wcs); n > 0 {
			break
		}
		if _, err := conn.CompChannel().Wait(ctx); err != nil {
			log.Fatal(err)
		}
		conn.CQ().Ack(1)
	}
	fmt.Printf("%d bytes: %q\n", wcs[0].ByteLen, buf.Bytes()[:wcs[0].ByteLen])
	mr.Close()
	conn.Close()
	buf.Close()
	// Output:
	// 15 bytes: "hello over RDMA"
}
