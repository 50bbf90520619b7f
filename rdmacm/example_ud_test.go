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

// ExampleDialUD sends one datagram to a UD server through the AH, QP
// number and Q_Key the rdma_cm reported. Its server here is
// ExampleListenUD's, started by serveOneUD.
func ExampleDialUD() {
	addr := serveOneUD() // "192.0.2.1:port"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := rdmacm.DialUD(ctx, addr, nil)
	if err != nil {
		log.Fatal(err) // a *rdmacm.SIDRError if nobody listens
	}
	defer u.Close()
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	mr, err := u.PD().RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close() // before u.Close, deferred earlier
	sge, err := mr.SGE(0, copy(buf.Bytes(), "one datagram"))
	if err != nil {
		log.Fatal(err)
	}
	p := u.Peer()
	wr := uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge},
		AH: p.AH, RemoteQPN: p.QPN, RemoteQKey: p.QKey}
	if _, err := u.QP().PostSend([]uverbs.SendWR{wr}); err != nil {
		log.Fatal(err)
	}
	wcs := make([]cq.WC, 1)
	for n := 0; n == 0; {
		if n, err = u.CQ().Poll(wcs); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("sent:", wcs[0].Status)
	// Output:
	// sent: success
}

// ExampleListenUD receives one datagram, its receive posted before the
// request is answered with room for the GRH, and learns the sender from
// it (ReplyTo) to answer it. Its client here is ExampleDialUD's, started
// by sendDatagram.
func ExampleListenUD() {
	ctx := context.Background()
	var (
		buf *uverbs.Buffer
		mr  *uverbs.MR
	)
	cfg := &rdmacm.Config{SetupUD: func(u *rdmacm.UDConn) (err error) {
		if buf, err = uverbs.AllocBuffer(4096); err != nil {
			return err
		}
		if mr, err = u.PD().RegMR(buf.Bytes(), uverbs.AccessLocalWrite); err != nil {
			return err
		}
		sge, err := mr.SGE(0, uverbs.UDRecvSize(1024)) // 40 bytes of GRH, then the payload
		if err != nil {
			return err
		}
		_, err = u.QP().PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{sge}}})
		return err
	}}
	l, err := rdmacm.ListenUD(ctx, "192.0.2.1:0", cfg) // port 0: any free one
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	go sendDatagram(l.Addr().String())
	u, err := l.Accept(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer u.Close()
	defer buf.Close()
	defer mr.Close()
	wcs := make([]cq.WC, 1)
	for n := 0; n == 0; {
		if n, err = u.CQ().Poll(wcs); err != nil {
			log.Fatal(err)
		}
	}
	peer, err := u.ReplyTo(wcs[0], buf.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	defer peer.AH.Close() // with peer.QPN and peer.QKey, the address of a reply
	fmt.Printf("%d bytes: %q\n", wcs[0].ByteLen-uverbs.GRHSize, buf.Bytes()[uverbs.GRHSize:wcs[0].ByteLen])
	// Output:
	// 12 bytes: "one datagram"
}
