package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// soakCompletions is how many completions the soak counts: small by
// default so make test stays quick; GOVERBS_SOAK=1000000 (make vmtest
// RUN=TestSoak VMFLAGS='-env GOVERBS_SOAK=1000000') runs the full size.
func soakCompletions(t *testing.T) int {
	if s := os.Getenv("GOVERBS_SOAK"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 {
			t.Fatalf("GOVERBS_SOAK=%q", s)
		}
		return n
	}
	return 200000
}

// The soak: RC SEND and RDMA WRITE WITH IMM through a loopback pair,
// reaped by polls of random batch sizes mixed with event-driven
// stretches. Every wr_id is seen exactly once, and nothing is left over.
func TestSoak(t *testing.T) {
	f := setup(t)
	total := soakCompletions(t)
	msgs := total / 2 // each message completes on both sides
	scq, rcq := f.newCQ(t, 256), f.newCQ(t, 256)
	a, b := f.newQP(t, uverbs.RC, scq, scq), f.newQP(t, uverbs.RC, rcq, rcq)
	rdmatest.ConnectRC(t, a, b)
	const depth = 32 // sends in flight; the QPs hold 64
	rng := rand.New(rand.NewPCG(1, 2))
	sendSeen := make([]bool, msgs)
	recvSeen := make([]bool, msgs)
	nsend, nrecv, posted, recvPosted := 0, 0, 0, 0
	wcs := make([]cq.WC, 64)
	take := func(w cq.WC) {
		if w.Status != cq.Success {
			t.Fatalf("completion %+v: %v", w, w.Status)
		}
		if w.Opcode&cq.RecvBit != 0 {
			id := int(w.Imm)
			if id >= msgs || recvSeen[id] {
				t.Fatalf("receive of message %d seen twice or unknown", id)
			}
			recvSeen[id] = true
			nrecv++
			return
		}
		if w.WRID >= uint64(msgs) || sendSeen[w.WRID] {
			t.Fatalf("send %d seen twice or unknown", w.WRID)
		}
		sendSeen[w.WRID] = true
		nsend++
	}
	drain := func(q *cq.CQ, batch int) int {
		got := 0
		for {
			n, err := q.Poll(wcs[:batch])
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wcs[:n] {
				take(w)
			}
			got += n
			if n < batch {
				return got
			}
		}
	}
	sge := []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 64)}
	wr := []uverbs.SendWR{{}}
	start := time.Now()
	deadline := start.Add(20 * time.Minute)
	events := 0
	for nsend < msgs || nrecv < msgs {
		if time.Now().After(deadline) {
			t.Fatalf("soak stuck: %d/%d sends, %d/%d receives", nsend, msgs, nrecv, msgs)
		}
		for recvPosted < msgs && recvPosted-nrecv < 48 {
			f.recv(t, b, uint64(recvPosted), 1)
			recvPosted++
		}
		for posted < msgs && posted-nsend < depth && posted < recvPosted {
			op := uverbs.WRSendWithImm
			if posted%2 == 1 {
				op = uverbs.WRRDMAWriteWithImm
			}
			wr[0] = uverbs.SendWR{WRID: uint64(posted), Opcode: op, Flags: uverbs.SendSignaled, SGL: sge,
				Imm: uint32(posted), RemoteAddr: f.mr.Addr() + 131072, RKey: f.mr.RKey()}
			if _, err := a.PostSend(wr); err != nil {
				t.Fatal(err)
			}
			posted++
		}
		if rng.IntN(8) == 0 {
			// An event-driven stretch: arm, drain, wait, ack.
			for _, q := range []*cq.CQ{scq, rcq} {
				if err := q.ReqNotify(cq.NextCompletion); err != nil {
					t.Fatal(err)
				}
			}
			if drain(scq, 64)+drain(rcq, 64) > 0 {
				continue // something came: the arm may fire later, harmlessly
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := f.ch.Wait(ctx)
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			if c != nil {
				c.Ack(1)
				events++
			}
			continue
		}
		drain(scq, 1+rng.IntN(32))
		drain(rcq, 1+rng.IntN(32))
	}
	// Late events from the last arms.
	for {
		c, ok, err := f.ch.TryWait()
		if !ok || err != nil {
			break
		}
		c.Ack(1)
		events++
	}
	took := time.Since(start)
	if n := drain(scq, 64) + drain(rcq, 64); n != 0 {
		t.Errorf("%d completions left over", n)
	}
	for i := 0; i < msgs; i++ {
		if !sendSeen[i] || !recvSeen[i] {
			t.Fatalf("message %d: send seen %v, receive seen %v", i, sendSeen[i], recvSeen[i])
		}
	}
	t.Logf("%d completions (%d messages) in %v: %.0f completions/s, %d events",
		nsend+nrecv, msgs, took.Round(time.Millisecond), float64(nsend+nrecv)/took.Seconds(), events)
}
