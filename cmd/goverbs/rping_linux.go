package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

func init() { registerInterruptible("rping", rpingSummary, rpingTo) }

// rping, as rdma-core's: the client SENDs the address, rkey and size of
// its start buffer; the server RDMA READs it into its own buffer and
// SENDs a go-ahead; the client SENDs its sink buffer's; the server RDMA
// WRITEs what it read there and SENDs a go-ahead; -C times. The server
// serves one client until it disconnects.

// The registered memory, one buffer: the receive's 16 bytes, two send
// slots (a SEND's buffer is not reused before the next completes), and
// the size-byte rdma buffer (the server's sink and source, the client's
// sink), then the client's start buffer.
const (
	rpingRecvOff = 0
	rpingSendOff = 64 // and 96
	rpingRDMAOff = 128
)

// The work request ids.
const (
	rpingRecvWRID = 1
	rpingSendWRID = 2
	rpingRDMAWRID = 3
)

// errRpingDisconnected ends a wait when the peer has disconnected.
var errRpingDisconnected = errors.New("the peer disconnected")

func rpingTo(ctx context.Context, stdout, stderr io.Writer, args []string) int {
	c, ok := rpingFlags(stderr, args)
	if !ok {
		return 2
	}
	s := &rpingSession{c: c, out: stdout, errOut: stderr}
	var err error
	if c.server {
		err = s.server(ctx)
	} else {
		err = s.client(ctx)
	}
	if cerr := s.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return failTo(stderr, "rping: %v", err)
	}
	return 0
}

// rpingSession is one side of one connection.
type rpingSession struct {
	c           *rpingConfig
	out, errOut io.Writer

	buf  *uverbs.Buffer
	mr   *uverbs.MR
	conn *rdmacm.Conn

	wcs     [8]cq.WC
	head, n int // wcs[head:n] are polled and not yet handled
	slot    int // the next send slot
}

func (s *rpingSession) debugf(format string, args ...any) {
	if s.c.debug {
		fmt.Fprintf(s.out, format+"\n", args...)
	}
}

func (s *rpingSession) config() *rdmacm.Config {
	return &rdmacm.Config{
		// rping's QP: 16 sends, 2 receives, one SGE each; a CQ of 32.
		Cap:    uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1},
		CQSize: 32,
		Setup:  s.setup,
	}
}

// setup registers the memory and posts the first receive, before the
// connection is made: Config.Setup.
func (s *rpingSession) setup(conn *rdmacm.Conn) error {
	var err error
	if s.buf, err = uverbs.AllocBuffer(rpingRDMAOff + 2*s.c.size); err != nil {
		return err
	}
	if s.mr, err = conn.PD().RegMR(s.buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite); err != nil {
		return err
	}
	s.debugf("allocated & registered buffers...")
	return s.postRecv(conn.QP())
}

// close releases the memory and the connection: the MR before the Conn
// (whose close may close the PD), the buffer after it.
func (s *rpingSession) close() error {
	var err error
	if s.mr != nil {
		err = s.mr.Close()
	}
	if s.conn != nil {
		if cerr := s.conn.Close(); err == nil {
			err = cerr
		}
	}
	if s.buf != nil {
		s.buf.Close()
	}
	return err
}

func (s *rpingSession) rdmaBuf() []byte { return s.buf.Bytes()[rpingRDMAOff : rpingRDMAOff+s.c.size] }
func (s *rpingSession) startBuf() []byte {
	return s.buf.Bytes()[rpingRDMAOff+s.c.size : rpingRDMAOff+2*s.c.size]
}

func (s *rpingSession) postRecv(qp *uverbs.QP) error {
	sge, err := s.mr.SGE(rpingRecvOff, rpingInfoLen)
	if err != nil {
		return err
	}
	if _, err := qp.PostRecv([]uverbs.RecvWR{{WRID: rpingRecvWRID, SGL: []uverbs.SGE{sge}}}); err != nil {
		return fmt.Errorf("post recv: %w", err)
	}
	return nil
}

// sendInfo SENDs info (rping_format_send and the post).
func (s *rpingSession) sendInfo(info rpingInfo) error {
	off := rpingSendOff + 32*s.slot
	s.slot ^= 1
	info.marshal(s.buf.Bytes()[off : off+rpingInfoLen])
	if info != (rpingInfo{}) { // rping_format_send's, not the go-ahead
		s.debugf("RDMA addr %x rkey %x len %d", info.Addr, info.RKey, info.Size)
	}
	sge, err := s.mr.SGE(off, rpingInfoLen)
	if err != nil {
		return err
	}
	_, err = s.conn.QP().PostSend([]uverbs.SendWR{{WRID: rpingSendWRID, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge}}})
	if err != nil {
		return fmt.Errorf("post send: %w", err)
	}
	return nil
}

// goAhead SENDs the server's go-ahead: rping's server sends its send
// buffer, which it never fills, so 16 zero bytes.
func (s *rpingSession) goAhead() error { return s.sendInfo(rpingInfo{}) }

// rdma posts an RDMA READ or WRITE of n bytes between the rdma buffer
// and the peer's buffer.
func (s *rpingSession) rdma(op uverbs.WROpcode, remote rpingInfo, n int) error {
	sge, err := s.mr.SGE(rpingRDMAOff, n)
	if err != nil {
		return err
	}
	_, err = s.conn.QP().PostSend([]uverbs.SendWR{{WRID: rpingRDMAWRID, Opcode: op, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{sge}, RemoteAddr: remote.Addr, RKey: remote.RKey}})
	if err != nil {
		return fmt.Errorf("post send: %w", err)
	}
	return nil
}

// next returns the next completion, waiting for it on the CQ's channel
// (arm, poll, wait, as package cq says). A wait cut short by the peer's
// disconnect, and a flushed request, are errRpingDisconnected.
func (s *rpingSession) next(ctx context.Context) (cq.WC, error) {
	c := s.conn.CQ()
	for s.head == s.n {
		n, err := c.Poll(s.wcs[:])
		if err == nil && n == 0 {
			if err = c.ReqNotify(cq.NextCompletion); err == nil {
				n, err = c.Poll(s.wcs[:])
			}
		}
		if err != nil {
			return cq.WC{}, err
		}
		if n > 0 {
			s.head, s.n = 0, n
			break
		}
		if _, err := s.conn.CompChannel().Wait(ctx); err != nil {
			if s.disconnected() { // waitCtx ended ctx
				return cq.WC{}, errRpingDisconnected
			}
			return cq.WC{}, err
		}
		if err := c.Ack(1); err != nil {
			return cq.WC{}, err
		}
	}
	wc := s.wcs[s.head]
	s.head++
	switch {
	case wc.Status == cq.WRFlushErr:
		return wc, errRpingDisconnected
	case wc.Status != cq.Success:
		return wc, fmt.Errorf("cq completion failed status %s (%d)", wc.Status, wc.Status)
	}
	return wc, nil
}

func (s *rpingSession) disconnected() bool {
	select {
	case <-s.conn.Disconnected():
		return true
	default:
		return false
	}
}

// await handles completions until one of opcode want: send completions
// are passed over, a receive (16 bytes, else rping's "bogus data") is
// reposted at once, before anything else is sent, and returned when
// wanted.
func (s *rpingSession) await(ctx context.Context, want cq.Opcode) (rpingInfo, error) {
	for {
		wc, err := s.next(ctx)
		if err != nil {
			return rpingInfo{}, err
		}
		switch wc.Opcode {
		case cq.OpSend:
			s.debugf("send completion")
			continue
		case cq.OpRecv:
			s.debugf("recv completion")
			if wc.ByteLen != rpingInfoLen {
				return rpingInfo{}, fmt.Errorf("received bogus data, size %d", wc.ByteLen)
			}
			info, err := parseRpingInfo(s.buf.Bytes()[rpingRecvOff : rpingRecvOff+rpingInfoLen])
			if err != nil {
				return rpingInfo{}, err
			}
			if err := s.postRecv(s.conn.QP()); err != nil {
				return rpingInfo{}, err
			}
			if want == cq.OpRecv {
				return info, nil
			}
		case cq.OpRDMARead, cq.OpRDMAWrite:
			s.debugf("rdma %v completion", wc.Opcode)
			if want == wc.Opcode {
				return rpingInfo{}, nil
			}
		}
		return rpingInfo{}, fmt.Errorf("unexpected %v completion (waiting for %v)", wc.Opcode, want)
	}
}

// waitCtx is ctx, also ended when the connection goes down.
func (s *rpingSession) waitCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.conn.Disconnected():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (s *rpingSession) server(ctx context.Context) error {
	addr := net.JoinHostPort(s.c.addr, strconv.Itoa(s.c.port))
	cfg := s.config()
	cfg.Backlog = 3 // rping's rdma_listen
	l, err := rdmacm.Listen(ctx, addr, cfg)
	if err != nil {
		return err
	}
	s.debugf("rdma_bind_addr successful\nrdma_listen")
	s.conn, err = l.Accept(ctx)
	l.Close()
	if err != nil {
		return err
	}
	s.debugf("accepted %v", s.conn.RemoteAddr())
	ctx, cancel := s.waitCtx(ctx)
	defer cancel()
	err = s.serve(ctx)
	if errors.Is(err, errRpingDisconnected) {
		// rping's server ends with its client's disconnect, whatever
		// it was waiting for, and exits 0.
		fmt.Fprintln(s.errOut, "server DISCONNECT EVENT...")
		return nil
	}
	return err
}

func (s *rpingSession) serve(ctx context.Context) error {
	rdma := s.rdmaBuf()
	for {
		// The client's start buffer.
		src, err := s.await(ctx, cq.OpRecv)
		if err != nil {
			return err
		}
		s.debugf("Received rkey %x addr %x len %d from peer", src.RKey, src.Addr, src.Size)
		if int(src.Size) > len(rdma) {
			return fmt.Errorf("the client's buffer has %d bytes, more than ours (-S %d)", src.Size, len(rdma))
		}
		if err := s.rdma(uverbs.WRRDMARead, src, int(src.Size)); err != nil {
			return err
		}
		s.debugf("server posted rdma read req ")
		if _, err := s.await(ctx, cq.OpRDMARead); err != nil {
			return err
		}
		s.debugf("server received read complete")
		if s.c.verbose {
			fmt.Fprintf(s.out, "server ping data: %s\n", cString(rdma))
		}
		if err := s.goAhead(); err != nil {
			return err
		}
		s.debugf("server posted go ahead")
		// The client's sink buffer.
		sink, err := s.await(ctx, cq.OpRecv)
		if err != nil {
			return err
		}
		s.debugf("server received sink adv")
		n := min(len(cString(rdma))+1, len(rdma)) // strlen(rdma_buf) + 1
		if n > int(sink.Size) {
			return fmt.Errorf("the client's sink buffer has %d bytes, the ping data %d", sink.Size, n)
		}
		if err := s.rdma(uverbs.WRRDMAWrite, sink, n); err != nil {
			return err
		}
		s.debugf("rdma write from lkey %x laddr %x len %d", s.mr.LKey(), s.mr.Addr()+rpingRDMAOff, n)
		if _, err := s.await(ctx, cq.OpRDMAWrite); err != nil {
			return err
		}
		s.debugf("server rdma write complete ")
		if err := s.goAhead(); err != nil {
			return err
		}
		s.debugf("server posted go ahead")
	}
}

func (s *rpingSession) client(ctx context.Context) error {
	addr := net.JoinHostPort(s.c.addr, strconv.Itoa(s.c.port))
	cfg := s.config()
	// rping_init_conn_param: one read each way, retry forever on RNR.
	cfg.ResponderResources, cfg.InitiatorDepth, cfg.RetryCount, cfg.RNRRetryCount = 1, 1, 7, 7
	var err error
	if s.conn, err = rdmacm.Dial(ctx, addr, cfg); err != nil {
		return err
	}
	s.debugf("rdma_connect successful")
	ctx, cancel := s.waitCtx(ctx)
	defer cancel()
	start, rdma := s.startBuf(), s.rdmaBuf()
	startAddr, rdmaAddr := s.mr.Addr()+uint64(rpingRDMAOff+s.c.size), s.mr.Addr()+rpingRDMAOff
	letter := byte(65)
	for ping := 0; s.c.count == 0 || ping < s.c.count; ping++ {
		letter = rpingFill(start, ping, letter)
		if err := s.sendInfo(rpingInfo{startAddr, s.mr.RKey(), uint32(s.c.size)}); err != nil {
			return err
		}
		// The server has read the start buffer.
		if _, err := s.await(ctx, cq.OpRecv); err != nil {
			return fmt.Errorf("ping %d: waiting for the server's go-ahead: %w", ping, err)
		}
		if err := s.sendInfo(rpingInfo{rdmaAddr, s.mr.RKey(), uint32(s.c.size)}); err != nil {
			return err
		}
		// The server has written the sink.
		if _, err := s.await(ctx, cq.OpRecv); err != nil {
			return fmt.Errorf("ping %d: waiting for the server's write: %w", ping, err)
		}
		if s.c.validate && !bytes.Equal(start, rdma) {
			fmt.Fprintln(s.errOut, "data mismatch!")
			return fmt.Errorf("ping %d: data mismatch: sent %q, got back %q", ping, cString(start), cString(rdma))
		}
		if s.c.verbose {
			fmt.Fprintf(s.out, "ping data: %s\n", cString(rdma))
		}
	}
	return nil
}
