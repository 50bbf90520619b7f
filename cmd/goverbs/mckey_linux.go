package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

func init() { registerInterruptible("mckey", mckeySummary, mckeyTo) }

// mckey, as rdma-core's: join the group (the receiver posts its receives
// first), report the group's GID, wait 3 s as mckey does for an
// InfiniBand subnet manager to set up the switches, then send -C
// datagrams of -S bytes to the group, each with the sender's QP number
// as immediate data, or receive -C of them; then leave. Unlike
// rdma-core's, the sender waits for its sends' completions before it
// leaves, so that destroying its QP flushes none of them.

// mckeyWait is how long mckey waits after its join.
var mckeyWait = 3 * time.Second

func mckeyTo(ctx context.Context, stdout, stderr io.Writer, args []string) int {
	c, ok := mckeyFlags(stderr, args)
	if !ok {
		return 2
	}
	if err := mckeyRun(ctx, stdout, c); err != nil {
		fmt.Fprintln(stdout, "return status 1")
		return failTo(stderr, "mckey: %v", err)
	}
	fmt.Fprintln(stdout, "return status 0")
	return 0
}

func mckeyRun(ctx context.Context, out io.Writer, c *mckeyConfig) (err error) {
	role := "server"
	if c.sender {
		role = "client"
	}
	fmt.Fprintf(out, "mckey: starting %s\n", role)
	slot := uverbs.UDRecvSize(c.size)
	var buf *uverbs.Buffer
	var mr *uverbs.MR
	defer func() {
		if mr != nil {
			mr.Close()
		}
		if buf != nil {
			buf.Close()
		}
	}()
	setup := func(u *rdmacm.UDConn) (err error) {
		n := max(c.count, 1)
		if buf, err = uverbs.AllocBuffer(n * slot); err != nil {
			return err
		}
		if mr, err = u.PD().RegMR(buf.Bytes(), uverbs.AccessLocalWrite); err != nil {
			return err
		}
		if c.sender {
			return nil
		}
		for i := range c.count {
			sge, err := mr.SGE(i*slot, slot)
			if err != nil {
				return err
			}
			if _, err := u.QP().PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{sge}}}); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintln(out, "mckey: joining")
	u, err := rdmacm.JoinMulticast(ctx, c.bind, c.group, &rdmacm.Config{SendOnly: c.sendOnly, SetupUD: setup,
		Cap:    uverbs.QPCap{MaxSendWR: uint32(max(c.count, 1)), MaxRecvWR: uint32(max(c.count, 1)), MaxSendSGE: 1, MaxRecvSGE: 1},
		CQSize: 2 * max(c.count, 1)})
	if err != nil {
		return err
	}
	defer func() {
		mr.Close() // before the UDConn's PD goes
		mr = nil
		if cerr := u.Close(); err == nil && !errors.Is(cerr, rdmacm.ErrClosed) {
			err = cerr
		}
		fmt.Fprintln(out, "test complete")
	}()
	p := u.Peer()
	// On RoCE the group's GID is its IPv4 address mapped into IPv6 (the
	// kernel's cma_iboe_set_mgid), its LID and SL 0.
	fmt.Fprintf(out, "mckey: joined dgid: %v mlid 0x0 sl 0\n", netip.AddrFrom16(u.RemoteAddr().Addr().As16()))
	select {
	case <-time.After(mckeyWait):
	case <-ctx.Done():
		return ctx.Err()
	}
	if c.count > 0 {
		if c.sender {
			fmt.Fprintln(out, "initiating data transfers")
			err = mckeySend(ctx, u, p, mr, c)
		} else {
			fmt.Fprintln(out, "receiving data transfers")
			err = mckeyReceive(ctx, u, c)
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "data transfers complete")
	}
	return u.Leave()
}

// mckeySend sends c.count datagrams to the group, all signaled, and waits
// for their completions.
func mckeySend(ctx context.Context, u *rdmacm.UDConn, p rdmacm.UDPeer, mr *uverbs.MR, c *mckeyConfig) error {
	sge, err := mr.SGE(0, c.size)
	if err != nil {
		return err
	}
	for i := range c.count {
		if _, err := u.QP().PostSend([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled,
			Imm: u.QP().QPN(), SGL: []uverbs.SGE{sge}, AH: p.AH, RemoteQPN: p.QPN, RemoteQKey: p.QKey}}); err != nil {
			return err
		}
	}
	return mckeyPoll(ctx, u, c.count)
}

// mckeyReceive waits for c.count datagrams.
func mckeyReceive(ctx context.Context, u *rdmacm.UDConn, c *mckeyConfig) error {
	return mckeyPoll(ctx, u, c.count)
}

// mckeyPoll takes n completions from u's CQ, waiting on its channel, and
// fails on an error completion.
func mckeyPoll(ctx context.Context, u *rdmacm.UDConn, n int) error {
	wcs := make([]cq.WC, 16)
	for n > 0 {
		if err := u.CQ().ReqNotify(cq.NextCompletion); err != nil {
			return err
		}
		k, err := u.CQ().Poll(wcs[:min(len(wcs), n)])
		if err != nil {
			return err
		}
		for _, w := range wcs[:k] {
			if w.Status != cq.Success {
				return fmt.Errorf("completion %d: %v", w.WRID, w.Status)
			}
		}
		if n -= k; n == 0 || k > 0 {
			continue
		}
		c, err := u.CompChannel().Wait(ctx)
		if err != nil {
			return err
		}
		c.Ack(1)
	}
	return nil
}
