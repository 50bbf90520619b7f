package conformance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// fix is one test's device: a context, a PD, a completion channel and a
// registered 1 MiB buffer.
type fix struct {
	ctx *uverbs.Context
	pd  *uverbs.PD
	ch  *cq.Channel
	buf *uverbs.Buffer
	mr  *uverbs.MR
	mem []byte
}

func setup(t *testing.T) *fix {
	t.Helper()
	if strings.HasSuffix(t.Name(), "RXE") {
		rdmatest.SkipUnless(t, "rxe", "the test pins soft-RoCE's own behaviour (its name ends in RXE)")
	}
	f := &fix{ctx: rdmatest.Open(t)}
	var err error
	if f.pd, err = f.ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if f.ch, err = f.ctx.NewCompChannel(); err != nil {
		t.Fatal(err)
	}
	if f.buf, err = uverbs.AllocBuffer(1 << 20); err != nil {
		t.Fatal(err)
	}
	f.mem = f.buf.Bytes()
	if f.mr, err = f.pd.RegMR(f.mem, rdmatest.AllAccess); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.mr.Close()
		f.buf.Close()
		f.ch.Close()
		f.pd.Close()
	})
	return f
}

// newCQ makes a CQ on the fixture's channel; at the end of the test its
// events are acknowledged and it is closed (after the QPs, which close
// first since their cleanups were registered later).
func (f *fix) newCQ(t *testing.T, size int) *cq.CQ {
	t.Helper()
	return f.newCQConfig(t, cq.Config{Size: size})
}

// newCQConfig is newCQ with more of the CQ's configuration.
func (f *fix) newCQConfig(t *testing.T, cfg cq.Config) *cq.CQ {
	t.Helper()
	cfg.Channel = f.ch
	q, err := f.ctx.NewCQ(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		q.Ack(q.Unacked())
		if err := q.Close(); err != nil {
			t.Errorf("closing a CQ: %v", err)
		}
	})
	return q
}

func (f *fix) newQP(t *testing.T, typ uverbs.QPType, send, recv *cq.CQ) *uverbs.QP {
	t.Helper()
	qp, err := f.pd.NewQP(uverbs.QPConfig{Type: typ, SendCQ: send, RecvCQ: recv,
		Cap: uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := qp.Close(); err != nil {
			t.Errorf("closing a QP: %v", err)
		}
	})
	return qp
}

// rcPair makes two connected RC QPs: a sends on aSend and receives on
// aRecv, b likewise.
func (f *fix) rcPair(t *testing.T, aSend, aRecv, bSend, bRecv *cq.CQ) (a, b *uverbs.QP) {
	t.Helper()
	a, b = f.newQP(t, uverbs.RC, aSend, aRecv), f.newQP(t, uverbs.RC, bSend, bRecv)
	rdmatest.ConnectRC(t, a, b)
	return a, b
}

// recv posts n receives of 256 bytes on qp, wr_ids from base.
func (f *fix) recv(t *testing.T, qp *uverbs.QP, base uint64, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		off := 65536 + (int(base)+i)%128*256
		if _, err := qp.PostRecv([]uverbs.RecvWR{{WRID: base + uint64(i), SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, off, 256)}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// send posts one 16-byte signaled request of the given opcode and flags.
func (f *fix) send(t *testing.T, qp *uverbs.QP, wrid uint64, op uverbs.WROpcode, flags uverbs.SendFlags) {
	t.Helper()
	wr := uverbs.SendWR{WRID: wrid, Opcode: op, Flags: flags | uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 16)}, Imm: uint32(wrid)}
	if op == uverbs.WRRDMAWrite || op == uverbs.WRRDMAWriteWithImm || op == uverbs.WRRDMARead {
		wr.RemoteAddr, wr.RKey = f.mr.Addr()+32768, f.mr.RKey()
	}
	if _, err := qp.PostSend([]uverbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
}

// wait waits up to 10 s for an event and returns its CQ.
func (f *fix) wait(t *testing.T) *cq.CQ {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := f.ch.Wait(ctx)
	if err != nil {
		t.Fatalf("no completion event in 10 s: %v", err)
	}
	return c
}

// noEvent checks that no event is queued. Call it after the completions
// that could raise one have been polled: rxe queues the event when it
// writes the CQE, so by then any event is there.
func (f *fix) noEvent(t *testing.T, why string) {
	t.Helper()
	c, ok, err := f.ch.TryWait()
	if err != nil {
		t.Errorf("%s: TryWait: %v", why, err)
	} else if ok {
		c.Ack(1)
		t.Errorf("%s: an event came (CQ %d)", why, c.EventHandle())
	}
}
