package mlx5model_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// Tests of goverbs' mlx5 provider on the model, for what the conformance
// suite does not reach: they run through uverbs, as an application does.

type pfix struct {
	ctx      *uverbs.Context
	pd       *uverbs.PD
	mr       *uverbs.MR
	mem      []byte
	scq, rcq *cq.CQ
}

func psetup(t *testing.T) *pfix {
	t.Helper()
	t.Setenv(rdmatest.EnvDevice, rdmatest.ModelDevice)
	f := &pfix{ctx: rdmatest.Open(t)}
	var err error
	if f.pd, err = f.ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	buf, err := uverbs.AllocBuffer(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	f.mem = buf.Bytes()
	if f.mr, err = f.pd.RegMR(f.mem, rdmatest.AllAccess); err != nil {
		t.Fatal(err)
	}
	if f.scq, err = f.ctx.NewCQ(cq.Config{Size: 256}); err != nil {
		t.Fatal(err)
	}
	if f.rcq, err = f.ctx.NewCQ(cq.Config{Size: 256}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.scq.Close()
		f.rcq.Close()
		f.mr.Close()
		buf.Close()
		f.pd.Close()
	})
	return f
}

func (f *pfix) qp(t *testing.T, typ uverbs.QPType, send, recv *cq.CQ) *uverbs.QP {
	t.Helper()
	q, err := f.pd.NewQP(uverbs.QPConfig{Type: typ, SendCQ: send, RecvCQ: recv,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func (f *pfix) pair(t *testing.T) (*uverbs.QP, *uverbs.QP) {
	a, b := f.qp(t, uverbs.RC, f.scq, f.scq), f.qp(t, uverbs.RC, f.rcq, f.rcq)
	rdmatest.ConnectRC(t, a, b)
	return a, b
}

func post(t *testing.T, q *uverbs.QP, wrs ...uverbs.SendWR) {
	t.Helper()
	if _, err := q.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
}

func recv(t *testing.T, q *uverbs.QP, wrid uint64, sgl ...uverbs.SGE) {
	t.Helper()
	if _, err := q.PostRecv([]uverbs.RecvWR{{WRID: wrid, SGL: sgl}}); err != nil {
		t.Fatal(err)
	}
}

// Inline data and scatter lists: a 60-byte inline send lands across two
// receive SGEs.
func TestProviderInlineScatter(t *testing.T) {
	f := psetup(t)
	a, b := f.pair(t)
	msg := bytes.Repeat([]byte("inline!"), 9)[:60]
	copy(f.mem[512:], msg)
	recv(t, b, 7, rdmatest.SGE(t, f.mr, 4096, 20), rdmatest.SGE(t, f.mr, 8192, 100))
	post(t, a, uverbs.SendWR{WRID: 8, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 512, 60)}})
	clear(f.mem[512:572]) // inline: the bytes went with the WQE
	w := rdmatest.PollN(t, f.rcq, 1)[0]
	if w.Status != cq.Success || w.WRID != 7 || w.ByteLen != 60 || w.Opcode != cq.OpRecv {
		t.Errorf("receive %+v", w)
	}
	if got := append(append([]byte{}, f.mem[4096:4116]...), f.mem[8192:8232]...); !bytes.Equal(got, msg) {
		t.Errorf("received %q", got)
	}
	if w := rdmatest.PollN(t, f.scq, 1)[0]; w.WRID != 8 || w.Opcode != cq.OpSend {
		t.Errorf("send %+v", w)
	}
}

// A QP taken back to RESET and connected again posts from its first
// WQE: the device forgets the queues at RESET, so the provider must too.
func TestProviderQPReuseAfterReset(t *testing.T) {
	f := psetup(t)
	a, b := f.pair(t)
	for round := 0; round < 2; round++ {
		for i := 0; i < 3; i++ {
			post(t, a, uverbs.SendWR{WRID: uint64(10*round + i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 8)}, RemoteAddr: f.mr.Addr() + 4096, RKey: f.mr.RKey()})
		}
		for i, w := range rdmatest.PollN(t, f.scq, 3) {
			if w.Status != cq.Success || w.WRID != uint64(10*round+i) {
				t.Fatalf("round %d, completion %d: %+v", round, i, w)
			}
		}
		for _, q := range []*uverbs.QP{a, b} {
			rdmatest.Modify(t, q, uverbs.QPAttr{State: uverbs.QPReset}, uverbs.QPAttrState)
		}
		rdmatest.ConnectRC(t, a, b)
	}
}

// An error the device reports (injected) completes the WQE with its
// status and flushes the rest; the QP is in ERR.
func TestProviderInjectedError(t *testing.T) {
	f := psetup(t)
	a, _ := f.pair(t)
	rdmatest.Model(t).InjectError(a.QPN(), uapi.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR)
	for i := 0; i < 3; i++ {
		post(t, a, uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 8)}, RemoteAddr: f.mr.Addr() + 4096, RKey: f.mr.RKey()})
	}
	want := []cq.Status{cq.LocProtErr, cq.WRFlushErr, cq.WRFlushErr}
	for i, w := range rdmatest.PollN(t, f.scq, 3) {
		if w.WRID != uint64(i) || w.Status != want[i] || w.QPNum != a.QPN() {
			t.Errorf("completion %d: %+v, want %v", i, w, want[i])
		}
	}
	if s, err := a.Query(uverbs.QPAttrState); err != nil || s.State != uverbs.QPErr {
		t.Errorf("state %v, %v", s.State, err)
	}
}

// Unsignaled sends free their slots when a later signaled one completes:
// many rounds through a small send queue never find it full.
func TestProviderUnsignaledSlots(t *testing.T) {
	f := psetup(t)
	a, _ := f.pair(t)
	depth := int(a.Cap().MaxSendWR)
	for round := 0; round < 20; round++ {
		wrs := make([]uverbs.SendWR, depth)
		for i := range wrs {
			wrs[i] = uverbs.SendWR{WRID: uint64(round), Opcode: uverbs.WRRDMAWrite,
				SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 8)}, RemoteAddr: f.mr.Addr() + 4096, RKey: f.mr.RKey()}
		}
		wrs[depth-1].Flags = uverbs.SendSignaled
		post(t, a, wrs...)
		if w := rdmatest.PollN(t, f.scq, 1)[0]; w.WRID != uint64(round) || w.Status != cq.Success {
			t.Fatalf("round %d: %+v", round, w)
		}
	}
}

// UD with immediate data, and a datagram to a QP with another Q_Key is
// dropped.
func TestProviderUDImm(t *testing.T) {
	f := psetup(t)
	u1, u2 := f.qp(t, uverbs.UD, f.scq, f.scq), f.qp(t, uverbs.UD, f.rcq, f.rcq)
	rdmatest.ReadyUD(t, u1, 0x77)
	rdmatest.ReadyUD(t, u2, 0x77)
	ah, err := f.pd.NewAH(uverbs.AHAttr{IsGlobal: true, Port: 1,
		GRH: uverbs.GlobalRoute{DGID: rdmatest.GID(t, 1), SGIDIndex: 1, HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	recv(t, u2, 1, rdmatest.SGE(t, f.mr, 4096, 256))
	post(t, u1, uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 10)}, AH: ah, RemoteQPN: u2.QPN(), RemoteQKey: 0x78})
	rdmatest.PollN(t, f.scq, 1)
	time.Sleep(20 * time.Millisecond)
	if n, _ := f.rcq.Poll(make([]cq.WC, 1)); n != 0 {
		t.Error("a datagram with the wrong Q_Key arrived")
	}
	post(t, u1, uverbs.SendWR{WRID: 3, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, Imm: 0xdeadbeef,
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 10)}, AH: ah, RemoteQPN: u2.QPN(), RemoteQKey: 0x77})
	w := rdmatest.PollN(t, f.rcq, 1)[0]
	if w.Status != cq.Success || w.Imm != 0xdeadbeef || w.Flags&cq.WithImm == 0 || w.Flags&cq.WithGRH == 0 ||
		w.ByteLen != 50 || w.SrcQP != u1.QPN() || w.QPNum != u2.QPN() {
		t.Errorf("UD receive %+v", w)
	}
	rdmatest.PollN(t, f.scq, 1)
}

// A send with invalidate reports the rkey to the receiver.
func TestProviderSendWithInv(t *testing.T) {
	f := psetup(t)
	a, b := f.pair(t)
	recv(t, b, 1, rdmatest.SGE(t, f.mr, 4096, 64))
	post(t, a, uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSendWithInv, Flags: uverbs.SendSignaled, Imm: 0x1234567,
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 8)}})
	w := rdmatest.PollN(t, f.rcq, 1)[0]
	if w.Status != cq.Success || w.Flags&cq.WithInv == 0 || w.Imm != 0x1234567 {
		t.Errorf("receive %+v", w)
	}
	rdmatest.PollN(t, f.scq, 1)
}

// The QPs of one context ring one half of one blue-flame register, each
// under its own lock only (provider/mlx5's ringSend): eight QPs posting
// at once from eight goroutines, their doorbells meeting on the half,
// complete every WQE, and the model sees 8-byte doorbells only.
func TestProviderSharedDoorbellHalf(t *testing.T) {
	f := psetup(t)
	const qps, rounds = 8, 300
	var wg sync.WaitGroup
	errs := make(chan error, qps)
	for i := range qps {
		c, err := f.ctx.NewCQ(cq.Config{Size: 64})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		a, b := f.qp(t, uverbs.RC, c, c), f.qp(t, uverbs.RC, c, c)
		rdmatest.ConnectRC(t, a, b)
		sge := rdmatest.SGE(t, f.mr, i*64, 8)
		wg.Add(1)
		go func() {
			defer wg.Done()
			wcs := make([]cq.WC, 4)
			for r := range rounds {
				wr := uverbs.SendWR{WRID: uint64(r), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
					SGL: []uverbs.SGE{sge}, RemoteAddr: f.mr.Addr() + 4096 + uint64(i*64), RKey: f.mr.RKey()}
				if _, err := a.PostSend([]uverbs.SendWR{wr}); err != nil {
					errs <- err
					return
				}
				deadline := time.Now().Add(10 * time.Second)
				for n := 0; n == 0; {
					var err error
					if n, err = c.Poll(wcs); err != nil {
						errs <- err
						return
					}
					if n == 1 && (wcs[0].Status != cq.Success || wcs[0].WRID != uint64(r)) {
						errs <- fmt.Errorf("QP %d, round %d: %+v", i, r, wcs[0])
						return
					}
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("QP %d, round %d: no completion", i, r)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// How many doorbells the model's scan counts apart depends on the
	// host's load (under -race on two cores it has been a third of those
	// rung): the completions above show that every WQE ran; this, that
	// the half carried doorbells.
	if st := rdmatest.Model(t).Stats(); st.SendDoorbells < qps {
		t.Errorf("%d send doorbells taken for %d rung", st.SendDoorbells, qps*rounds)
	}
}
