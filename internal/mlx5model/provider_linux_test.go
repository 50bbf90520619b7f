package mlx5model_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// A send with invalidate reports the rkey to the receiver, whose window
// it was; the model refuses one that names no window of the receiver's.
func TestProviderSendWithInv(t *testing.T) {
	f := psetup(t)
	mr, err := f.pd.RegMR(f.mem[1<<19:], uverbs.AccessLocalWrite|uverbs.AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	mw, err := f.pd.AllocMW(uverbs.MWType2)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	a, b := f.pair(t)
	post(t, b, uverbs.SendWR{WRID: 9, Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled,
		Bind: &uverbs.MWBind{MW: mw, MR: mr, Addr: mr.Addr(), Length: 64, Access: uverbs.AccessRemoteRead}})
	if w := rdmatest.PollN(t, f.rcq, 1)[0]; w.Status != cq.Success || w.Opcode != cq.OpBindMW || w.WRID != 9 {
		t.Fatalf("bind: %+v", w)
	}
	recv(t, b, 1, rdmatest.SGE(t, f.mr, 4096, 64))
	post(t, a, uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSendWithInv, Flags: uverbs.SendSignaled, Imm: mw.RKey(),
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 8)}})
	w := rdmatest.PollN(t, f.rcq, 1)[0]
	if w.Status != cq.Success || w.Flags&cq.WithInv == 0 || w.Imm != mw.RKey() {
		t.Errorf("receive %+v", w)
	}
	rdmatest.PollN(t, f.scq, 1)

	// The same key again: the window is free now.
	recv(t, b, 3, rdmatest.SGE(t, f.mr, 4096, 64))
	post(t, a, uverbs.SendWR{WRID: 4, Opcode: uverbs.WRSendWithInv, Flags: uverbs.SendSignaled, Imm: mw.RKey(),
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 8)}})
	if w := rdmatest.PollN(t, f.rcq, 1)[0]; w.Status != cq.LocProtErr {
		t.Errorf("receive of an invalidation of a free window: %+v (%v)", w, w.Status)
	}
	if w := rdmatest.PollN(t, f.scq, 1)[0]; w.Status != cq.RemAccessErr {
		t.Errorf("send with invalidate of a free window: %+v (%v)", w, w.Status)
	}
}

// A window's WQEs are larger than a small QP's: a bind takes the room of
// three one-block WQEs, an invalidation two, and the queue refuses what
// does not fit rather than overrun its ring (which the model would
// report). The WQE after each carries the small fence.
func TestProviderWindowRoom(t *testing.T) {
	f := psetup(t)
	mr, err := f.pd.RegMR(f.mem[1<<19:], uverbs.AccessLocalWrite|uverbs.AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	a, err := f.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: f.scq, RecvCQ: f.scq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := f.qp(t, uverbs.RC, f.rcq, f.rcq)
	rdmatest.ConnectRC(t, a, b)
	if got := a.Cap().MaxSendWR; got != 4 {
		t.Fatalf("MaxSendWR %d, want 4", got)
	}
	var mws []*uverbs.MW
	for range 3 {
		mw, err := f.pd.AllocMW(uverbs.MWType2)
		if err != nil {
			t.Fatal(err)
		}
		defer mw.Close()
		mws = append(mws, mw)
	}
	bind := func(mw *uverbs.MW, off uint64) uverbs.SendWR {
		return uverbs.SendWR{WRID: off, Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled,
			Bind: &uverbs.MWBind{MW: mw, MR: mr, Addr: mr.Addr() + off, Length: 64, Access: uverbs.AccessRemoteWrite}}
	}
	// One bind (three WQEs' room) and a write fit in four; a second bind does not.
	n, err := a.PostSend([]uverbs.SendWR{bind(mws[0], 0), {WRID: 100, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 8)}, RemoteAddr: f.mr.Addr() + 64, RKey: f.mr.RKey()}, bind(mws[1], 64)})
	if n != 2 || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("posted %d (%v), want 2 and ENOMEM", n, err)
	}
	for _, w := range rdmatest.PollN(t, f.scq, 2) {
		if w.Status != cq.Success {
			t.Fatalf("%+v (%v)", w, w.Status)
		}
	}
	post(t, a, uverbs.SendWR{WRID: 6, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, Bind: &uverbs.MWBind{MW: mws[0]}})
	rdmatest.PollN(t, f.scq, 1)
	// Around the ring: binds and invalidations.
	for i := range 20 {
		mw := mws[i%3]
		for _, wr := range []uverbs.SendWR{bind(mw, uint64(i%3)*64+128),
			{WRID: 7, Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, Bind: &uverbs.MWBind{MW: mw}}} {
			post(t, a, wr)
			if w := rdmatest.PollN(t, f.scq, 1)[0]; w.Status != cq.Success || w.WRID != wr.WRID {
				t.Fatalf("round %d: %+v (%v)", i, w, w.Status)
			}
		}
	}
	if err := mws[0].Close(); err != nil { // a window bound once, to a QP still open
		t.Fatal(err)
	}
	if s := rdmatest.Model(t).Stats(); s.WQEs == 0 {
		t.Error("no WQEs executed")
	}
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
