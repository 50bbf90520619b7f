// Rdmawrite writes into a peer's memory with RDMA WRITE WITH IMMEDIATE:
// the target tells the writer where (its buffer's address and rkey, in
// its Endpoint's text), the writer's bytes land there without the
// target's CPU, and the immediate value raises one receive completion on
// the target, which then finds the data in place. Two RC queue pairs on
// one RDMA device (loopback), busy polling.
//
//	rdmawrite [-d rxe0] [-n 3]
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
	n := flag.Int("n", 3, "`number` of writes")
	flag.Parse()
	if err := run(os.Stdout, *dev, *n); err != nil {
		fmt.Fprintln(os.Stderr, "rdmawrite:", err)
		os.Exit(1)
	}
}

const slot = 64 // each write goes to its own slot of the target's buffer

func run(out io.Writer, devName string, n int) (err error) {
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
	gid, err := dev.FindGID(1, uverbs.GIDTypeRoCEv2, netip.Addr{})
	if err != nil {
		return err
	}
	c, err := dev.NewCQ(cq.Config{Size: 64})
	if err != nil {
		return err
	}
	closers = append(closers, c.Close)
	newQP := func() (*uverbs.QP, error) {
		qp, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: c, RecvCQ: c,
			Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err == nil {
			closers = append(closers, qp.Close)
		}
		return qp, err
	}
	newMR := func(access uverbs.Access) (*uverbs.MR, error) {
		buf, err := uverbs.AllocBuffer(n * slot)
		if err != nil {
			return nil, err
		}
		closers = append(closers, buf.Close)
		mr, err := pd.RegMR(buf.Bytes(), access)
		if err == nil {
			closers = append(closers, mr.Close)
		}
		return mr, err
	}
	writer, err := newQP()
	if err != nil {
		return err
	}
	target, err := newQP()
	if err != nil {
		return err
	}
	src, err := newMR(uverbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	dst, err := newMR(uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite) // the writer may write here
	if err != nil {
		return err
	}

	// The target's endpoint names its buffer; its text is what it would
	// send to the writer, which reads it back.
	tep := uverbs.Endpoint{QPN: target.QPN(), PSN: 7, GID: gid.GID, Addr: dst.Addr(), RKey: dst.RKey()}
	text, err := tep.MarshalText()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "target endpoint %s\n", text)
	var peer uverbs.Endpoint
	if err := peer.UnmarshalText(text); err != nil {
		return err
	}
	wep := uverbs.Endpoint{QPN: writer.QPN(), PSN: 9, GID: gid.GID}
	if err := writer.ConnectRC(wep, peer, nil); err != nil {
		return err
	}
	if err := target.ConnectRC(tep, wep, nil); err != nil {
		return err
	}

	for i := range n {
		// A write with immediate consumes one receive at the target; its
		// data goes where the writer says, so the receive needs no buffer.
		if _, err := target.PostRecv([]uverbs.RecvWR{{WRID: uint64(i)}}); err != nil {
			return err
		}
		msg := fmt.Sprintf("write %d, straight into the target's memory", i)
		copy(src.Bytes()[i*slot:], msg)
		sge, err := src.SGE(i*slot, len(msg))
		if err != nil {
			return err
		}
		_, err = writer.PostSend([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRRDMAWriteWithImm,
			Flags: uverbs.SendSignaled, Imm: uint32(1000 + i), SGL: []uverbs.SGE{sge},
			RemoteAddr: peer.Addr + uint64(i*slot), RKey: peer.RKey}})
		if err != nil {
			return err
		}
		// Two completions: the writer's, and the target's receive.
		var recv *cq.WC
		wcs := make([]cq.WC, 2)
		for got, deadline := 0, time.Now().Add(10*time.Second); got < 2; {
			k, err := c.Poll(wcs[got:])
			if err != nil {
				return err
			}
			for j := got; j < got+k; j++ {
				if wcs[j].Status != cq.Success {
					return fmt.Errorf("%v completion: %v", wcs[j].Opcode, wcs[j].Status)
				}
				if wcs[j].Opcode == cq.OpRecvRDMAWithImm {
					recv = &wcs[j]
				}
			}
			if got += k; time.Now().After(deadline) {
				return fmt.Errorf("write %d: %d of 2 completions in 10 s", i, got)
			}
		}
		if recv == nil || recv.Flags&cq.WithImm == 0 || recv.Imm != uint32(1000+i) || recv.ByteLen != uint32(len(msg)) {
			return fmt.Errorf("write %d: target's completion %+v", i, recv)
		}
		got := string(dst.Bytes()[i*slot : i*slot+len(msg)])
		if got != msg {
			return fmt.Errorf("write %d: the target holds %q", i, got)
		}
		fmt.Fprintf(out, "imm %d: %q\n", recv.Imm, got)
	}
	fmt.Fprintf(out, "%d writes with immediate arrived\n", n)
	return nil
}
