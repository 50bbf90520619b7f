package uverbs_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// srqSlot is the size of each receive's slot in the test's buffer.
const srqSlot = 64

// Four RC QPs take their receives from one SRQ, refilled in rounds: every
// receive completes exactly once, on the QP whose peer sent the message
// it holds (WC.QPNum), with the WRID it was posted with. Then the limit
// event fires once when the SRQ falls below the armed limit, and Query
// shows it disarmed; a post allocates nothing; the SRQ cannot be closed
// under its QPs (EBUSY), a QP on it refuses receives of its own, and
// Close ends it once.
func TestSRQSharedByQPs(t *testing.T) {
	const nQP, rounds, perRound = 4, 5, 10 // each round: perRound messages from each sender
	c := openRXE(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	if _, err := pd.NewSRQ(uverbs.SRQConfig{MaxWR: 0, MaxSGE: 1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("an SRQ of no receives: %v, want EINVAL", err)
	}
	srq, err := pd.NewSRQ(uverbs.SRQConfig{MaxWR: nQP * perRound, MaxSGE: 1, UserValue: 5})
	if err != nil {
		t.Fatal(err)
	}
	if srq.MaxWR() < nQP*perRound || srq.MaxSGE() < 1 || srq.UserValue() != 5 || srq.PD() != pd {
		t.Errorf("SRQ: MaxWR %d, MaxSGE %d, UserValue %d", srq.MaxWR(), srq.MaxSGE(), srq.UserValue())
	}
	sendCQ, err := c.NewCQ(cq.Config{Size: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer sendCQ.Close()
	recvCQ, err := c.NewCQ(cq.Config{Size: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer recvCQ.Close()
	buf, err := uverbs.AllocBuffer(2 * nQP * perRound * srqSlot)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()

	var servers, clients [nQP]*uverbs.QP
	for i := range nQP {
		if servers[i], err = pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: sendCQ, RecvCQ: recvCQ, SRQ: srq,
			Cap: uverbs.QPCap{MaxSendWR: 1, MaxSendSGE: 1}}); err != nil {
			t.Fatal(err)
		}
		if clients[i], err = pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: sendCQ, RecvCQ: sendCQ,
			Cap: uverbs.QPCap{MaxSendWR: perRound, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
			t.Fatal(err)
		}
		rdmatest.ConnectRC(t, servers[i], clients[i])
	}
	closeQPs := func() {
		for i := range nQP {
			for _, q := range []*uverbs.QP{servers[i], clients[i]} {
				if q != nil {
					q.Close()
				}
			}
		}
	}
	defer closeQPs()
	if _, err := servers[0].PostRecv([]uverbs.RecvWR{{WRID: 1}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostRecv on a QP that receives through an SRQ: %v, want EINVAL", err)
	}

	// The receives take the first half of the buffer, a slot each; the
	// senders' messages (the sender's index and a sequence number) the
	// second.
	recvSlots := nQP * perRound
	seen := map[uint64]bool{}
	wrid := uint64(0)
	for r := range rounds {
		wrs := make([]uverbs.RecvWR, recvSlots)
		for k := range wrs {
			wrid++
			wrs[k] = uverbs.RecvWR{WRID: wrid, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, k*srqSlot, srqSlot)}}
		}
		if n, err := srq.PostRecv(wrs); n != len(wrs) || err != nil {
			t.Fatalf("round %d: posted %d of %d receives: %v", r, n, len(wrs), err)
		}
		for s := range perRound {
			for i := range nQP {
				off := recvSlots*srqSlot + (i*perRound+s)*srqSlot
				msg := buf.Bytes()[off : off+16]
				binary.LittleEndian.PutUint64(msg, uint64(i))
				binary.LittleEndian.PutUint64(msg[8:], uint64(r*perRound+s))
				wr := uverbs.SendWR{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
					SGL: []uverbs.SGE{rdmatest.SGE(t, mr, off, 16)}}
				if _, err := clients[i].PostSend([]uverbs.SendWR{wr}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, wc := range rdmatest.PollN(t, sendCQ, recvSlots) {
			if wc.Status != cq.Success {
				t.Fatalf("send completion %+v", wc)
			}
		}
		for _, wc := range rdmatest.PollN(t, recvCQ, recvSlots) {
			if wc.Status != cq.Success || wc.Opcode != cq.OpRecv || wc.ByteLen != 16 {
				t.Fatalf("receive completion %+v", wc)
			}
			if seen[wc.WRID] || wc.WRID <= wrid-uint64(recvSlots) || wc.WRID > wrid {
				t.Fatalf("round %d: receive %d completed twice, or was not posted this round", r, wc.WRID)
			}
			seen[wc.WRID] = true
			k := int(wc.WRID - (wrid - uint64(recvSlots)) - 1)
			sender := binary.LittleEndian.Uint64(buf.Bytes()[k*srqSlot:])
			if sender >= nQP || wc.QPNum != servers[sender].QPN() {
				t.Errorf("receive %d holds sender %d's message, completed on QP %d", wc.WRID, sender, wc.QPNum)
			}
		}
	}
	if len(seen) != rounds*recvSlots {
		t.Errorf("%d receives completed, want %d", len(seen), rounds*recvSlots)
	}

	// The limit: 8 receives, armed at 5; four messages take it to 4.
	if err := srq.Arm(0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Arm(0): %v, want EINVAL", err)
	}
	wrs := make([]uverbs.RecvWR, 8)
	for k := range wrs {
		wrs[k] = uverbs.RecvWR{WRID: uint64(1000 + k), SGL: []uverbs.SGE{rdmatest.SGE(t, mr, k*srqSlot, srqSlot)}}
	}
	if _, err := srq.PostRecv(wrs); err != nil {
		t.Fatal(err)
	}
	if err := srq.Arm(5); err != nil {
		t.Fatal(err)
	}
	oneEach := func() { // a message from each sender, received
		t.Helper()
		for i := range nQP {
			wr := uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{rdmatest.SGE(t, mr, recvSlots*srqSlot, 16)}}
			if _, err := clients[i].PostSend([]uverbs.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
		}
		rdmatest.PollN(t, sendCQ, nQP)
		rdmatest.PollN(t, recvCQ, nQP)
	}
	if a, err := srq.Query(); err != nil || a.Limit != 5 || a.MaxWR != srq.MaxWR() {
		t.Errorf("Query after Arm(5): %+v, %v", a, err)
	}
	oneEach()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ev uverbs.AsyncEvent
	for ev.Kind() != uverbs.ElementSRQ { // passing over the port's and the QPs' events
		if ev, err = c.WaitAsyncEvent(ctx); err != nil {
			t.Fatal(err)
		}
		ev.Ack()
	}
	if h, _ := ev.SRQHandle(); ev.Type != uverbs.EventSRQLimitReached || h != srq.EventHandle() {
		t.Errorf("async event %v, want SRQ limit reached for SRQ %d", ev, srq.EventHandle())
	}
	if a, err := srq.Query(); err != nil || a.Limit != 0 {
		t.Errorf("Query after the limit event: %+v, %v; want the limit disarmed", a, err)
	}
	// The rest of the receives are taken: no second event.
	oneEach()
	for {
		ev, ok, err := c.TryAsyncEvent()
		if err != nil || !ok {
			break
		}
		ev.Ack()
		if ev.Kind() == uverbs.ElementSRQ {
			t.Errorf("a second SRQ event %v: the limit event fires once", ev)
		}
	}

	one := wrs[:1]
	if n := testing.AllocsPerRun(10, func() {
		if _, err := srq.PostRecv(one); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("PostRecv allocates %v times", n)
	}

	if err := srq.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("Close under its QPs: %v, want EBUSY", err)
	}
	closeQPs()
	servers, clients = [nQP]*uverbs.QP{}, [nQP]*uverbs.QP{}
	if err := srq.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srq.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	if _, err := srq.PostRecv(wrs); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostRecv after Close: %v, want ErrClosed", err)
	}
	if _, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: sendCQ, RecvCQ: recvCQ, SRQ: srq}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("a QP on a closed SRQ: %v, want ErrClosed", err)
	}
}

// Closing the Context ends its SRQs: a post after it returns ErrClosed,
// and Close returns ErrClosed (the kernel destroyed it), with its ring
// given back.
func TestSRQContextClose(t *testing.T) {
	c := openRXE(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	srq, err := pd.NewSRQ(uverbs.SRQConfig{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := srq.PostRecv([]uverbs.RecvWR{{WRID: 1}}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostRecv after the Context's Close: %v, want ErrClosed", err)
	}
	if err := srq.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Close after the Context's Close: %v, want ErrClosed", err)
	}
}

// Resize (ibv_modify_srq with IBV_SRQ_MAX_WR) on rxe, which has
// IB_UVERBS_DEVICE_SRQ_RESIZE: the SRQ grows with its receives kept and
// taken in the order they were posted, refuses to shrink below what it
// holds or below its armed limit, or to grow past the device's MaxSRQWR
// (EINVAL, unchanged), and shrinks once drained.
func TestSRQResize(t *testing.T) {
	c := openRXE(t)
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if !attr.DeviceCapFlags.Has(uverbs.DeviceCapSRQResize) {
		t.Fatalf("rxe0's capabilities %v lack SRQ_RESIZE", attr.DeviceCapFlags)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	srq, err := pd.NewSRQ(uverbs.SRQConfig{MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	scq, err := c.NewCQ(cq.Config{Size: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer scq.Close()
	rcq, err := c.NewCQ(cq.Config{Size: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer rcq.Close()
	buf, err := uverbs.AllocBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	server, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: scq, RecvCQ: rcq, SRQ: srq,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	client, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: scq, RecvCQ: scq,
		Cap: uverbs.QPCap{MaxSendWR: 128, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rdmatest.ConnectRC(t, server, client)

	next := uint64(0)
	post := func(n int) (int, error) {
		wrs := make([]uverbs.RecvWR, n)
		for k := range wrs {
			wrs[k] = uverbs.RecvWR{WRID: next + uint64(k), SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, srqSlot)}}
		}
		n, err := srq.PostRecv(wrs)
		next += uint64(n)
		return n, err
	}
	first := int(srq.MaxWR())
	if n, err := post(first + 1); n != first || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("posting %d to an SRQ of %d: %d posted, %v", first+1, first, n, err)
	}
	if err := srq.Resize(100); err != nil {
		t.Fatal(err)
	}
	if a, err := srq.Query(); err != nil || srq.MaxWR() < 100 || a.MaxWR < 100 {
		t.Fatalf("after Resize(100): MaxWR %d, Query %+v, %v", srq.MaxWR(), a, err)
	}
	if n, err := post(100 - first); err != nil {
		t.Fatalf("posting %d more after the resize: %d posted, %v", 100-first, n, err)
	}
	for _, bad := range []struct {
		why   string
		maxWR uint32
	}{
		{"fewer than it holds", 50},
		{"more than the device's MaxSRQWR", uint32(attr.MaxSRQWR) + 1},
	} {
		if err := srq.Resize(bad.maxWR); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Resize(%d), %s: %v, want EINVAL", bad.maxWR, bad.why, err)
		}
	}
	if err := srq.Resize(0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Resize(0): %v, want EINVAL", err)
	}

	// Every receive, those posted before the resize first, in order.
	for k := range 100 {
		wr := uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 4096, 8)}}
		if _, err := client.PostSend([]uverbs.SendWR{wr}); err != nil {
			t.Fatalf("send %d: %v", k, err)
		}
	}
	rdmatest.PollN(t, scq, 100)
	for k, wc := range rdmatest.PollN(t, rcq, 100) {
		if wc.Status != cq.Success || wc.WRID != uint64(k) || wc.QPNum != server.QPN() {
			t.Fatalf("receive %d: %+v, want WRID %d on QP %d", k, wc, k, server.QPN())
		}
	}

	// Drained: an armed limit bounds a shrink from below.
	if err := srq.Arm(20); err != nil {
		t.Fatal(err)
	}
	if err := srq.Resize(10); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Resize(10) under a limit of 20: %v, want EINVAL", err)
	}
	if err := srq.Resize(30); err != nil {
		t.Fatalf("shrinking a drained SRQ to 30: %v", err)
	}
	if a, err := srq.Query(); err != nil || a.MaxWR < 30 || a.MaxWR >= 100 || a.Limit != 20 {
		t.Errorf("after Resize(30): Query %+v, %v", a, err)
	}
	if n, err := post(int(srq.MaxWR())); err != nil {
		t.Errorf("filling the shrunk SRQ: %d posted, %v", n, err)
	}
}

// An SRQ_ERR stops the posts of the SRQ it names with ErrSRQFailed
// (wrapping EIO), and of no other; Close still destroys it.
func TestSRQErrStopsPosts(t *testing.T) {
	c := openRXE(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	var srqs [2]*uverbs.SRQ
	for i := range srqs {
		if srqs[i], err = pd.NewSRQ(uverbs.SRQConfig{MaxWR: 4, MaxSGE: 1}); err != nil {
			t.Fatal(err)
		}
	}
	c.NoteAsync(uverbs.AsyncEvent{Type: uverbs.EventSRQErr, Element: srqs[0].EventHandle()})
	wr := []uverbs.RecvWR{{WRID: 1}}
	if _, err := srqs[0].PostRecv(wr); !errors.Is(err, uverbs.ErrSRQFailed) || !errors.Is(err, unix.EIO) {
		t.Errorf("PostRecv after SRQ_ERR: %v, want ErrSRQFailed", err)
	}
	if _, err := srqs[1].PostRecv(wr); err != nil {
		t.Errorf("PostRecv on the other SRQ: %v", err)
	}
	for _, s := range srqs {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
}
