// Rcecho is an RC echo: a server goroutine sends back each message a
// client sends it, over two RC queue pairs on one RDMA device (loopback).
// Both sides sleep on completion events instead of spinning: the server
// in cq.Channel's Serve loop, the client in its own arm, poll, wait loop.
// The client sends from a Go slice, inline, with no memory region.
//
//	rcecho [-d rxe0] [-n 5]
package main

import (
	"bytes"
	"context"
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
	n := flag.Int("n", 5, "`number` of messages")
	flag.Parse()
	if err := run(os.Stdout, *dev, *n); err != nil {
		fmt.Fprintln(os.Stderr, "rcecho:", err)
		os.Exit(1)
	}
}

const msgMax = 256

// side is one end: its QP, CQ and channel, and a registered buffer whose
// first half takes receives and second half holds what it sends.
type side struct {
	qp  *uverbs.QP
	c   *cq.CQ
	ch  *cq.Channel
	mr  *uverbs.MR
	mem []byte
	ep  uverbs.Endpoint
}

func run(out io.Writer, devName string, n int) (err error) {
	dev, err := uverbs.Open(devName)
	if err != nil {
		return err
	}
	defer dev.Close() // last: it would destroy whatever is left
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
	gid, err := dev.FindGID(1, uverbs.GIDTypeRoCEv2, netip.Addr{}) // the first RoCE v2 GID: no index to guess
	if err != nil {
		return err
	}
	newSide := func(psn uint32) (*side, error) {
		s := &side{}
		buf, err := uverbs.AllocBuffer(2 * msgMax)
		if err != nil {
			return nil, err
		}
		closers = append(closers, buf.Close)
		s.mem = buf.Bytes()
		if s.mr, err = pd.RegMR(s.mem, uverbs.AccessLocalWrite); err != nil {
			return nil, err
		}
		closers = append(closers, s.mr.Close)
		if s.ch, err = dev.NewCompChannel(); err != nil {
			return nil, err
		}
		closers = append(closers, s.ch.Close)
		if s.c, err = dev.NewCQ(cq.Config{Size: 16, Channel: s.ch}); err != nil {
			return nil, err
		}
		closers = append(closers, s.c.Close)
		s.qp, err = pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: s.c, RecvCQ: s.c,
			Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: msgMax}})
		if err != nil {
			return nil, err
		}
		closers = append(closers, s.qp.Close)
		s.ep = uverbs.Endpoint{QPN: s.qp.QPN(), PSN: psn, GID: gid.GID}
		return s, nil
	}
	srv, err := newSide(0x1000)
	if err != nil {
		return err
	}
	cli, err := newSide(0x2000)
	if err != nil {
		return err
	}
	// The endpoints would cross the network as text; here they are at hand.
	fmt.Fprintf(out, "server %v\nclient %v\n", srv.ep, cli.ep)
	for _, p := range []struct{ s, peer *side }{{srv, cli}, {cli, srv}} {
		if err := p.s.qp.ConnectRC(p.s.ep, p.peer.ep, nil); err != nil {
			return err
		}
		if err := p.s.postRecv(); err != nil { // before the peer can send
			return err
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srvCtx, stop := context.WithCancel(ctx)
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.serve(srvCtx) }()

	var echoErr error
	for i := range n {
		msg := fmt.Appendf(nil, "message %d", i)
		var echo []byte
		if echo, echoErr = cli.roundTrip(ctx, msg); echoErr != nil {
			break
		}
		if !bytes.Equal(echo, msg) {
			echoErr = fmt.Errorf("sent %q, got back %q", msg, echo)
			break
		}
		fmt.Fprintf(out, "echoed %q\n", echo)
	}
	stop()
	if err := <-srvDone; !errors.Is(err, context.Canceled) {
		echoErr = errors.Join(echoErr, fmt.Errorf("server: %w", err))
	}
	if echoErr != nil {
		return echoErr
	}
	fmt.Fprintf(out, "%d messages echoed\n", n)
	return nil
}

func (s *side) postRecv() error {
	sge, err := s.mr.SGE(0, msgMax)
	if err != nil {
		return err
	}
	_, err = s.qp.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{sge}}})
	return err
}

// serve echoes every message until ctx ends: Serve arms the CQ, polls it
// empty, and sleeps on the channel between events.
func (s *side) serve(ctx context.Context) error {
	return s.ch.Serve(ctx, []*cq.CQ{s.c}, &cq.ServeOptions{Batch: 8}, func(_ *cq.CQ, wcs []cq.WC) error {
		for _, wc := range wcs {
			if wc.Status != cq.Success {
				return fmt.Errorf("%v completion: %v", wc.Opcode, wc.Status)
			}
			if wc.Opcode != cq.OpRecv {
				continue // our echo's send completion
			}
			n := int(wc.ByteLen)
			copy(s.mem[msgMax:], s.mem[:n]) // the receive buffer is free for the next message
			if err := s.postRecv(); err != nil {
				return err
			}
			sge, err := s.mr.SGE(msgMax, n)
			if err != nil {
				return err
			}
			_, err = s.qp.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{sge}}})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// roundTrip sends msg inline and sleeps on completion events until the
// echo arrives: arm, then poll until empty, then wait, so that no
// completion slips between the poll and the wait.
func (s *side) roundTrip(ctx context.Context, msg []byte) ([]byte, error) {
	if err := s.qp.PostSendInline(uverbs.SendWR{WRID: 3, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}, msg); err != nil {
		return nil, err
	}
	wcs := make([]cq.WC, 8)
	for {
		if err := s.c.ReqNotify(cq.NextCompletion); err != nil {
			return nil, err
		}
		n, err := s.c.Poll(wcs)
		if err != nil {
			return nil, err
		}
		for _, wc := range wcs[:n] {
			if wc.Status != cq.Success {
				return nil, fmt.Errorf("%v completion: %v", wc.Opcode, wc.Status)
			}
			if wc.Opcode == cq.OpRecv {
				echo := append([]byte(nil), s.mem[:wc.ByteLen]...)
				return echo, s.postRecv()
			}
		}
		if n == 0 {
			fired, err := s.ch.Wait(ctx)
			if err != nil {
				return nil, err
			}
			fired.Ack(1)
		}
	}
}
