// Udping sends UD datagrams between two queue pairs on one RDMA device
// (loopback): the client sends pings from a Go slice, inline; the server
// reads who sent each from the GRH in front of the payload, answers
// through an address handle made from it, and the client reads the
// pong. A UD receive buffer needs uverbs.GRHSize bytes more than the
// payload.
//
//	udping [-d rxe0] [-n 3] [-ip 192.0.2.1]
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

func main() {
	dev := flag.String("d", "rxe0", "RDMA `device`")
	n := flag.Int("n", 3, "`number` of pings")
	ip := flag.String("ip", "", "send from the RoCE v2 GID of this `address` (default: the port's first RoCE v2 GID)")
	flag.Parse()
	var addr netip.Addr
	if *ip != "" {
		var err error
		if addr, err = netip.ParseAddr(*ip); err != nil {
			fmt.Fprintln(os.Stderr, "udping:", err)
			os.Exit(2)
		}
	}
	if err := run(os.Stdout, *dev, addr, *n); err != nil {
		fmt.Fprintln(os.Stderr, "udping:", err)
		os.Exit(1)
	}
}

const payloadMax = 64

// node is one UD queue pair with its CQ and a receive buffer.
type node struct {
	qp  *uverbs.QP
	c   *cq.CQ
	mr  *uverbs.MR
	mem []byte
	ep  uverbs.Endpoint
}

func run(out io.Writer, devName string, addr netip.Addr, n int) (err error) {
	dev, err := uverbs.Open(devName)
	if err != nil {
		return err
	}
	defer dev.Close()
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	closers = append(closers, pd.Close)
	gid, err := dev.FindGID(1, uverbs.GIDTypeRoCEv2, addr)
	if err != nil {
		return err
	}
	newNode := func() (*node, error) {
		nd := &node{}
		buf, err := uverbs.AllocBuffer(uverbs.UDRecvSize(payloadMax))
		if err != nil {
			return nil, err
		}
		closers = append(closers, buf.Close)
		nd.mem = buf.Bytes()
		if nd.mr, err = pd.RegMR(nd.mem, uverbs.AccessLocalWrite); err != nil {
			return nil, err
		}
		closers = append(closers, nd.mr.Close)
		if nd.c, err = dev.NewCQ(cq.Config{Size: 16}); err != nil {
			return nil, err
		}
		closers = append(closers, nd.c.Close)
		nd.qp, err = pd.NewQP(uverbs.QPConfig{Type: uverbs.UD, SendCQ: nd.c, RecvCQ: nd.c,
			Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: payloadMax}})
		if err != nil {
			return nil, err
		}
		closers = append(closers, nd.qp.Close)
		nd.ep = uverbs.Endpoint{QPN: nd.qp.QPN(), PSN: 1, GID: gid.GID}
		if err := nd.qp.ConnectUD(nd.ep, nil); err != nil { // Q_Key uverbs.DefaultQKey
			return nil, err
		}
		return nd, nd.postRecv()
	}
	srv, err := newNode()
	if err != nil {
		return err
	}
	cli, err := newNode()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "server QPN %#x, client QPN %#x, GID %v (index %d)\n", srv.ep.QPN, cli.ep.QPN, gid.GID, gid.Index)
	toSrv, err := pd.NewAHTo(cli.ep, srv.ep, nil)
	if err != nil {
		return err
	}
	closers = append(closers, toSrv.Close)

	for i := range n {
		ping := fmt.Appendf(nil, "ping %d", i)
		if err := cli.qp.PostSendInline(uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			AH: toSrv, RemoteQPN: srv.ep.QPN, RemoteQKey: uverbs.DefaultQKey}, ping); err != nil {
			return err
		}
		wc, data, err := srv.recv()
		if err != nil {
			return err
		}
		// Who sent it: the GRH holds the source GID (for RoCE v2 over
		// IPv4, the IPv4 header), the completion the source QPN.
		grh, err := uverbs.ParseGRH(srv.mem)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "server: %q from %v QPN %#x (IPv%d)\n", data, grh.Src(), wc.SrcQP, grh.IPVersion)
		if grh.SGID != cli.ep.GID || wc.SrcQP != cli.ep.QPN {
			return fmt.Errorf("ping %d came from GID %v QPN %#x, want %v %#x", i, grh.SGID, wc.SrcQP, cli.ep.GID, cli.ep.QPN)
		}
		// Answer the sender: an address handle from what the GRH says.
		back, err := pd.NewAHTo(srv.ep, uverbs.Endpoint{QPN: wc.SrcQP, GID: grh.SGID}, nil)
		if err != nil {
			return err
		}
		pong := fmt.Appendf(nil, "pong %d", i)
		err = srv.qp.PostSendInline(uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			AH: back, RemoteQPN: wc.SrcQP, RemoteQKey: uverbs.DefaultQKey}, pong)
		if err == nil {
			_, data, err = cli.recv()
		}
		err = errors.Join(err, back.Close())
		if err != nil {
			return err
		}
		if string(data) != string(pong) {
			return fmt.Errorf("client got %q, want %q", data, pong)
		}
		fmt.Fprintf(out, "client: %q\n", data)
	}
	fmt.Fprintf(out, "%d pings answered\n", n)
	return nil
}

func (nd *node) postRecv() error {
	sge, err := nd.mr.SGE(0, uverbs.UDRecvSize(payloadMax))
	if err != nil {
		return err
	}
	_, err = nd.qp.PostRecv([]uverbs.RecvWR{{SGL: []uverbs.SGE{sge}}})
	return err
}

// recv polls until a datagram arrives (skipping send completions), and
// returns its completion and payload (copied), with the next receive
// posted.
func (nd *node) recv() (cq.WC, []byte, error) {
	wcs := make([]cq.WC, 4)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		k, err := nd.c.Poll(wcs)
		if err != nil {
			return cq.WC{}, nil, err
		}
		for _, wc := range wcs[:k] {
			if wc.Status != cq.Success {
				return cq.WC{}, nil, fmt.Errorf("%v completion: %v", wc.Opcode, wc.Status)
			}
			if wc.Opcode == cq.OpRecv {
				// ByteLen counts the GRH's 40 bytes too.
				data := append([]byte(nil), nd.mem[uverbs.GRHSize:wc.ByteLen]...)
				return wc, data, nd.postRecv()
			}
		}
	}
	return cq.WC{}, nil, errors.New("no datagram in 10 s")
}
