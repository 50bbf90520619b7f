package mlx5model_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// srqSlot is the size of each receive's slot in the tests' buffers.
const srqSlot = 64

// srqRig is an SRQ with n RC QPs receiving through it, each connected to
// a client QP of its own that sends to it.
type srqRig struct {
	*pfix
	srq              *uverbs.SRQ
	servers, clients []*uverbs.QP
}

func newSRQRig(t *testing.T, n int, maxWR uint32) *srqRig {
	t.Helper()
	r := &srqRig{pfix: psetup(t)}
	var err error
	if r.srq, err = r.pd.NewSRQ(uverbs.SRQConfig{MaxWR: maxWR, MaxSGE: 1, UserValue: 5}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.srq.Close() })
	for range n {
		s, err := r.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: r.scq, RecvCQ: r.rcq, SRQ: r.srq,
			Cap: uverbs.QPCap{MaxSendWR: 1, MaxSendSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: r.scq, RecvCQ: r.scq,
			Cap: uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		rdmatest.ConnectRC(t, s, c)
		r.servers, r.clients = append(r.servers, s), append(r.clients, c)
	}
	t.Cleanup(r.closeQPs)
	return r
}

func (r *srqRig) closeQPs() {
	for _, q := range append(r.servers, r.clients...) {
		q.Close()
	}
	r.servers, r.clients = nil, nil
}

// postRecvs posts n receives of a slot each, slots from 0, WRIDs from first.
func (r *srqRig) postRecvs(t *testing.T, first uint64, n int) {
	t.Helper()
	wrs := make([]uverbs.RecvWR, n)
	for k := range wrs {
		wrs[k] = uverbs.RecvWR{WRID: first + uint64(k), SGL: []uverbs.SGE{rdmatest.SGE(t, r.mr, k*srqSlot, srqSlot)}}
	}
	if m, err := r.srq.PostRecv(wrs); m != n || err != nil {
		t.Fatalf("posted %d of %d receives: %v", m, n, err)
	}
}

// send posts a signaled 16-byte send from client i, from offset off.
func (r *srqRig) send(t *testing.T, i, off int) {
	t.Helper()
	wr := uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, r.mr, off, 16)}}
	if _, err := r.clients[i].PostSend([]uverbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
}

// Four RC QPs take their receives from one SRQ, refilled in rounds:
// every receive completes once, on the QP whose peer sent the message it
// holds, with its WRID. Then the limit event fires once, Query shows it
// disarmed, a post allocates nothing, the SRQ cannot be destroyed under
// its QPs (EBUSY) or resized (mlx5_ib cannot), and a QP on it refuses
// receives of its own. (uverbs' TestSRQSharedByQPs, on the model.)
func TestProviderSRQSharedByQPs(t *testing.T) {
	const nQP, rounds, perRound = 4, 5, 10
	r := newSRQRig(t, nQP, nQP*perRound)
	if r.srq.MaxWR() < nQP*perRound || r.srq.MaxSGE() < 1 {
		t.Errorf("SRQ: MaxWR %d, MaxSGE %d", r.srq.MaxWR(), r.srq.MaxSGE())
	}
	if _, err := r.servers[0].PostRecv([]uverbs.RecvWR{{WRID: 1}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv on a QP that receives through an SRQ: %v, want EINVAL", err)
	}
	if err := r.srq.Resize(100); !errors.Is(err, errs.ErrNotSupported) {
		t.Errorf("Resize on mlx5: %v, want ErrNotSupported", err)
	}
	recvSlots := nQP * perRound
	msgs := recvSlots * srqSlot
	seen := map[uint64]bool{}
	wrid := uint64(0)
	for round := range rounds {
		r.postRecvs(t, wrid+1, recvSlots)
		wrid += uint64(recvSlots)
		for s := range perRound {
			for i := range nQP {
				off := msgs + (i*perRound+s)*srqSlot
				binary.LittleEndian.PutUint64(r.mem[off:], uint64(i))
				binary.LittleEndian.PutUint64(r.mem[off+8:], uint64(round*perRound+s))
				r.send(t, i, off)
			}
		}
		for _, wc := range rdmatest.PollN(t, r.scq, recvSlots) {
			if wc.Status != cq.Success {
				t.Fatalf("send completion %+v", wc)
			}
		}
		for _, wc := range rdmatest.PollN(t, r.rcq, recvSlots) {
			if wc.Status != cq.Success || wc.Opcode != cq.OpRecv || wc.ByteLen != 16 {
				t.Fatalf("receive completion %+v", wc)
			}
			if seen[wc.WRID] || wc.WRID <= wrid-uint64(recvSlots) || wc.WRID > wrid {
				t.Fatalf("round %d: receive %d completed twice, or was not posted this round", round, wc.WRID)
			}
			seen[wc.WRID] = true
			k := int(wc.WRID - (wrid - uint64(recvSlots)) - 1)
			sender := binary.LittleEndian.Uint64(r.mem[k*srqSlot:])
			if sender >= nQP || wc.QPNum != r.servers[sender].QPN() {
				t.Errorf("receive %d holds sender %d's message, completed on QP %d", wc.WRID, sender, wc.QPNum)
			}
		}
	}
	if len(seen) != rounds*recvSlots {
		t.Errorf("%d receives completed, want %d", len(seen), rounds*recvSlots)
	}

	// The limit: 8 receives, armed at 5; four messages take it to 4.
	r.postRecvs(t, 1000, 8)
	if err := r.srq.Arm(5); err != nil {
		t.Fatal(err)
	}
	if a, err := r.srq.Query(); err != nil || a.Limit != 5 || a.MaxWR != r.srq.MaxWR() {
		t.Errorf("Query after Arm(5): %+v, %v", a, err)
	}
	oneEach := func() {
		t.Helper()
		for i := range nQP {
			r.send(t, i, msgs)
		}
		rdmatest.PollN(t, r.scq, nQP)
		rdmatest.PollN(t, r.rcq, nQP)
	}
	oneEach()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ev uverbs.AsyncEvent
	var err error
	for ev.Kind() != uverbs.ElementSRQ {
		if ev, err = r.ctx.WaitAsyncEvent(ctx); err != nil {
			t.Fatal(err)
		}
		ev.Ack()
	}
	if h, _ := ev.SRQHandle(); ev.Type != uverbs.EventSRQLimitReached || h != r.srq.EventHandle() {
		t.Errorf("async event %v, want SRQ limit reached for SRQ %d", ev, r.srq.EventHandle())
	}
	if a, err := r.srq.Query(); err != nil || a.Limit != 0 {
		t.Errorf("Query after the limit event: %+v, %v; want the limit disarmed", a, err)
	}
	oneEach()
	for {
		ev, ok, err := r.ctx.TryAsyncEvent()
		if err != nil || !ok {
			break
		}
		ev.Ack()
		if ev.Kind() == uverbs.ElementSRQ {
			t.Errorf("a second SRQ event %v: the limit event fires once", ev)
		}
	}

	one := []uverbs.RecvWR{{WRID: 7, SGL: []uverbs.SGE{rdmatest.SGE(t, r.mr, 0, srqSlot)}}}
	// The model's device goroutine runs beside the loop, and what it
	// allocates counts too: the least of three measures is PostRecv's.
	n := math.Inf(1)
	for range 3 {
		n = min(n, testing.AllocsPerRun(5, func() {
			if _, err := r.srq.PostRecv(one); err != nil {
				t.Fatal(err)
			}
		}))
	}
	if n != 0 {
		t.Errorf("PostRecv allocates %v times", n)
	}
	if err := r.srq.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("Close under its QPs: %v, want EBUSY", err)
	}
	r.closeQPs()
	if err := r.srq.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.srq.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
}

// The SRQ holds its WQEs less one (the free list's tail): posting one
// more fails with ENOMEM, and every WQE goes round the list many times
// as receives complete and are reposted.
func TestProviderSRQFullAndWrap(t *testing.T) {
	r := newSRQRig(t, 2, 7)
	if got := r.srq.MaxWR(); got != 7 {
		t.Fatalf("MaxWR %d, want 7 (8 WQEs less the tail)", got)
	}
	wrs := make([]uverbs.RecvWR, 8)
	for k := range wrs {
		wrs[k] = uverbs.RecvWR{WRID: uint64(k), SGL: []uverbs.SGE{rdmatest.SGE(t, r.mr, k*srqSlot, srqSlot)}}
	}
	if n, err := r.srq.PostRecv(wrs); n != 7 || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("posting 8 to an SRQ of 7: %d posted, %v", n, err)
	}
	// 7 in flight; each message's completion frees a WQE, reposted at once.
	next := uint64(7)
	pending := map[uint64]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true}
	for k := range 200 {
		r.send(t, k%2, 4096)
		rdmatest.PollN(t, r.scq, 1)
		wc := rdmatest.PollN(t, r.rcq, 1)[0]
		if wc.Status != cq.Success || !pending[wc.WRID] || wc.QPNum != r.servers[k%2].QPN() {
			t.Fatalf("message %d: %+v; pending %v", k, wc, pending)
		}
		delete(pending, wc.WRID)
		pending[next] = true
		r.postRecvs(t, next, 1)
		next++
	}
	if err := rdmatest.Model(t).Err(); err != nil {
		t.Fatal(err)
	}
}

// An RC send to a QP whose SRQ is empty waits (RNR) and completes once a
// receive is posted; a QP moved to ERR flushes its sends but no SRQ
// receive, raises LAST_WQE_REACHED, and the SRQ's receives go on to the
// other QPs.
func TestProviderSRQRNRAndError(t *testing.T) {
	r := newSRQRig(t, 2, 15)
	r.send(t, 0, 4096)
	time.Sleep(20 * time.Millisecond)
	if n, err := r.rcq.Poll(make([]cq.WC, 4)); n != 0 || err != nil {
		t.Fatalf("a receive completed with the SRQ empty: %d, %v", n, err)
	}
	r.postRecvs(t, 1, 4)
	if wc := rdmatest.PollN(t, r.scq, 1)[0]; wc.Status != cq.Success {
		t.Fatalf("send after RNR: %+v", wc)
	}
	if wc := rdmatest.PollN(t, r.rcq, 1)[0]; wc.Status != cq.Success || wc.WRID != 1 || wc.QPNum != r.servers[0].QPN() {
		t.Fatalf("receive after RNR: %+v", wc)
	}

	if err := r.servers[0].Modify(&uverbs.QPAttr{State: uverbs.QPErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := r.ctx.WaitAsyncEvent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ev.Ack()
		if h, ok := ev.QPHandle(); ok && h == r.servers[0].EventHandle() {
			if ev.Type != uverbs.EventQPLastWQEReached {
				t.Fatalf("event %v, want last WQE reached", ev)
			}
			break
		}
	}
	time.Sleep(10 * time.Millisecond)
	if n, _ := r.rcq.Poll(make([]cq.WC, 4)); n != 0 {
		t.Fatalf("%d receive completions after ERR: an SRQ's receives are not flushed", n)
	}
	// The three receives left go to the other QP.
	for range 3 {
		r.send(t, 1, 4096)
	}
	rdmatest.PollN(t, r.scq, 3)
	for k, wc := range rdmatest.PollN(t, r.rcq, 3) {
		if wc.Status != cq.Success || wc.WRID != uint64(2+k) || wc.QPNum != r.servers[1].QPN() {
			t.Fatalf("receive %d after the other QP's error: %+v", k, wc)
		}
	}
}

// A QP destroyed with receive completions still queued gives their SRQ
// WQEs back when the CQ is polled, and reports none of them: the SRQ
// holds as many receives as before.
func TestProviderSRQDestroyedQPGivesWQEsBack(t *testing.T) {
	r := newSRQRig(t, 2, 7)
	r.postRecvs(t, 0, 7)
	for range 7 {
		r.send(t, 0, 4096)
	}
	rdmatest.PollN(t, r.scq, 7)
	// The receive CQEs are written; wait for them, unpolled.
	deadline := time.Now().Add(5 * time.Second)
	for rdmatest.Model(t).Stats().CQEs < 14 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := r.servers[0].Close(); err != nil {
		t.Fatal(err)
	}
	r.servers = r.servers[1:]
	if n, err := r.rcq.Poll(make([]cq.WC, 16)); n != 0 || err != nil {
		t.Errorf("polled %d completions of a destroyed QP: %v", n, err)
	}
	r.postRecvs(t, 100, 7)
	for range 7 {
		r.send(t, 1, 4096)
	}
	rdmatest.PollN(t, r.scq, 7)
	for k, wc := range rdmatest.PollN(t, r.rcq, 7) {
		if wc.Status != cq.Success || wc.WRID != uint64(100+k) {
			t.Fatalf("receive %d after the QP's destroy: %+v", k, wc)
		}
	}
}
