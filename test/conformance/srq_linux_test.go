package conformance

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// The shared receive queue's statements: ibv_create_srq(3),
// ibv_modify_srq(3), ibv_post_srq_recv(3), and the SRQ parts of
// ibv_get_async_event(3) and of issue #39.

// Issue #39: many QPs on one SRQ at scale. Sixteen RC QPs take their
// receives from one SRQ of 64, each the peer of one of sixteen senders
// sending 6,250 messages apiece at once (100,000 in all; RNR retry 7, as
// 64 receives shared by sixteen senders run out), and the receiver
// reposts each receive as it completes. Every receive completes once per
// posting, with the wr_id it was posted with, on the QP the message's
// sender is connected to (WC.QPNum); no message is lost or duplicated,
// and each sender's arrive in the order sent.
func TestSRQManyQPsAtScale(t *testing.T) {
	const (
		nQP    = 16
		depth  = 64   // the SRQ's receives
		total  = 1e5  // messages, from all senders
		window = 8    // each sender's sends in flight
		magic  = 0x5a // in each message, with the sender and sequence
	)
	per := int(total) / nQP
	f := setup(t)
	rcq := f.newCQ(t, 2*depth) // never more than depth receives outstanding
	idle := f.newCQ(t, 16)     // the receivers' sends, the senders' receives: none
	srq := f.newSRQ(t, uverbs.SRQConfig{MaxWR: depth, MaxSGE: 1})
	var recvQP, sendQP [nQP]*uverbs.QP
	var scq [nQP]*cq.CQ
	for i := range nQP {
		scq[i] = f.newCQ(t, 2*window)
		recvQP[i] = f.qpOn(t, uverbs.RC, srq, idle, rcq, 1)
		sendQP[i] = f.qpOn(t, uverbs.RC, nil, scq[i], idle, window)
		rdmatest.ConnectRC(t, sendQP[i], recvQP[i]) // RNR retry 7
	}
	byQPN := map[uint32]int{}
	for i, q := range recvQP {
		byQPN[q.QPN()] = i
	}

	// The receives: wr_id = posting<<8 | slot, so each posting's wr_id
	// is its own; posted[slot] is the wr_id outstanding in the slot.
	var posted [depth]uint64
	var postings uint64
	recvWR := make([][]uverbs.RecvWR, depth)
	for k := range recvWR {
		recvWR[k] = []uverbs.RecvWR{f.srqRecvWR(t, 0, k)}
	}
	repost := func(k int) error {
		postings++
		posted[k] = postings<<8 | uint64(k)
		recvWR[k][0].WRID = posted[k]
		_, err := srq.PostRecv(recvWR[k])
		return err
	}
	for k := range depth {
		if err := repost(k); err != nil {
			t.Fatal(err)
		}
	}

	// The senders: message seq of sender i is 16 bytes, from slot
	// seq%window of the sender's own: i, seq, and a check word.
	var stop atomic.Bool
	var sent [nQP]atomic.Int64 // completed sends, for the progress report
	var wg sync.WaitGroup
	start := time.Now()
	for i := range nQP {
		base := srqSendBase + i*window*16
		sges := make([]uverbs.SGE, window)
		for k := range sges {
			sges[k] = rdmatest.SGE(t, f.mr, base+k*16, 16)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}
			wcs := make([]cq.WC, window)
			posts, done, misses := 0, 0, 0
			for done < per && !stop.Load() {
				for posts < per && posts-done < window {
					k := posts % window
					m := f.mem[base+k*16 : base+k*16+16]
					binary.LittleEndian.PutUint32(m, uint32(i))
					binary.LittleEndian.PutUint32(m[4:], uint32(posts))
					binary.LittleEndian.PutUint64(m[8:], magic<<56|uint64(i)<<32|uint64(posts))
					wr[0].WRID, wr[0].SGL = uint64(posts), sges[k:k+1]
					if _, err := sendQP[i].PostSend(wr); err != nil {
						t.Errorf("sender %d, message %d: %v", i, posts, err)
						stop.Store(true)
						return
					}
					posts++
				}
				n, err := scq[i].Poll(wcs)
				if err != nil {
					t.Errorf("sender %d: %v", i, err)
					stop.Store(true)
					return
				}
				for _, w := range wcs[:n] {
					if w.Status != cq.Success || w.WRID != uint64(done) {
						t.Errorf("sender %d: completion %+v (%v), want message %d's, successful", i, w, w.Status, done)
						stop.Store(true)
						return
					}
					done++
				}
				sent[i].Store(int64(done))
				if n > 0 {
					misses = 0
				} else if misses++; misses > 16 {
					time.Sleep(50 * time.Microsecond)
				} else {
					runtime.Gosched()
				}
			}
		}()
	}
	progress := func() (s int64) {
		for i := range sent {
			s += sent[i].Load()
		}
		return s
	}
	fail := func(format string, args ...any) {
		t.Helper()
		stop.Store(true)
		wg.Wait()
		t.Fatalf(format, args...)
	}

	// The receiver.
	var next [nQP]uint32 // each sender's next sequence number
	received, misses := 0, 0
	wcs := make([]cq.WC, 32)
	last, lastAt := 0, time.Now()
	for received < int(total) {
		if stop.Load() {
			fail("a sender failed, after %d messages received", received)
		}
		n, err := rcq.Poll(wcs)
		if err != nil {
			fail("poll: %v", err)
		}
		for _, w := range wcs[:n] {
			if w.Status != cq.Success || w.Opcode != cq.OpRecv || w.ByteLen != 16 {
				fail("receive %d: completion %+v (%v)", received, w, w.Status)
			}
			k := int(w.WRID & 0xff)
			if k >= depth || posted[k] != w.WRID {
				fail("receive %d: wr_id %#x was not posted, or completed before (slot %d holds %#x)", received, w.WRID, k, posted[k%depth])
			}
			posted[k] = 0
			m := f.mem[srqRecvBase+k*srqSlot:]
			i, seq, check := binary.LittleEndian.Uint32(m), binary.LittleEndian.Uint32(m[4:]), binary.LittleEndian.Uint64(m[8:])
			if i >= nQP || check != magic<<56|uint64(i)<<32|uint64(seq) {
				fail("receive %d (wr_id %#x): message % x is none of the senders'", received, w.WRID, m[:16])
			}
			if q, ok := byQPN[w.QPNum]; !ok || q != int(i) {
				fail("sender %d's message %d completed on QP %d (receiver %d, ok %v), want %d, its peer", i, seq, w.QPNum, q, ok, recvQP[i].QPN())
			}
			if seq != next[i] {
				fail("sender %d: message %d arrived after %d: lost, duplicated or out of order", i, seq, next[i]-1)
			}
			next[i]++
			received++
			if err := repost(k); err != nil {
				fail("reposting slot %d: %v", k, err)
			}
		}
		if n > 0 {
			misses = 0
		} else if misses++; misses > 16 {
			time.Sleep(50 * time.Microsecond)
		} else {
			runtime.Gosched()
		}
		if received != last {
			last, lastAt = received, time.Now()
		} else if time.Since(lastAt) > 30*time.Second {
			fail("no receive in 30 s: %d of %d received, %d sends completed; per sender %v", received, int(total), progress(), next)
		}
	}
	wg.Wait()
	took := time.Since(start)
	if t.Failed() {
		return
	}
	for i := range nQP {
		if next[i] != uint32(per) || sent[i].Load() != int64(per) {
			t.Errorf("sender %d: %d received, %d sends completed; want %d", i, next[i], sent[i].Load(), per)
		}
	}
	quiet(t, rcq, 50*time.Millisecond, "after the last message")
	for i := range nQP {
		if n, _ := scq[i].Poll(wcs); n != 0 {
			t.Errorf("sender %d: %d completions more", i, n)
		}
	}
	t.Logf("%d messages from %d senders through one SRQ of %d (MaxWR %d) in %v: %.0f messages/s, %d receives posted",
		int(total), nQP, depth, srq.MaxWR(), took.Round(time.Millisecond), total/took.Seconds(), postings)
}

// ibv_modify_srq(3): "Modifying the srq_limit arms the SRQ to produce an
// IBV_EVENT_SRQ_LIMIT_REACHED 'low watermark' asynchronous event once the
// number of WRs in the SRQ drops below srq_limit." Holding exactly the
// limit raises nothing; dropping below raises one event, which disarms
// the SRQ (Query's Limit reads 0) so that no second comes as it keeps
// draining; arming it again after a refill raises one more, at the new
// limit. A limit above the SRQ's size is EINVAL.
func TestSRQLimitEventOncePerArm(t *testing.T) {
	f := setup(t)
	scq, rcq := f.newCQ(t, 64), f.newCQ(t, 64)
	srq := f.newSRQ(t, uverbs.SRQConfig{MaxWR: 32, MaxSGE: 1})
	r := f.qpOn(t, uverbs.RC, srq, scq, rcq, 1)
	s := f.qpOn(t, uverbs.RC, nil, scq, scq, 32)
	rdmatest.ConnectRC(t, s, r)
	if err := srq.Arm(srq.MaxWR() + 1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Arm(MaxWR+1 = %d): %v, want EINVAL", srq.MaxWR()+1, err)
	}
	if a, err := srq.Query(); err != nil || a.Limit != 0 {
		t.Fatalf("Query of a new SRQ: %+v, %v; want no limit", a, err)
	}
	var id uint64
	messages := func(n int) { // n messages received, through the SRQ
		t.Helper()
		f.sendN(t, s, id, n)
		id += uint64(n)
		successes(t, scq, n)
		successes(t, rcq, n)
	}
	quietWindow := 200 * time.Millisecond // for an event that must not come
	round := func(name string, held, limit int) {
		t.Helper()
		if err := srq.Arm(uint32(limit)); err != nil {
			t.Fatalf("%s: Arm(%d): %v", name, limit, err)
		}
		if a, err := srq.Query(); err != nil || a.Limit != uint32(limit) {
			t.Errorf("%s: Query after Arm(%d): %+v, %v", name, limit, a, err)
		}
		messages(held - limit) // down to exactly the limit: not below it
		if n := countSRQEvents(t, srq, asyncFor(t, f.ctx, quietWindow)); n != 0 {
			t.Errorf("%s: %d limit events with %d receives left, the limit: want none until fewer", name, n, limit)
		}
		if a, err := srq.Query(); err != nil || a.Limit != uint32(limit) {
			t.Errorf("%s: Query at the limit: %+v, %v; want it still armed at %d", name, a, err, limit)
		}
		messages(1) // one below
		_, others := waitAsync(t, f.ctx, name+": the limit event", srqLimitEvent(srq))
		if n := countSRQEvents(t, srq, others); n != 0 {
			t.Errorf("%s: other SRQ events before the limit's: %v", name, others)
		}
		if a, err := srq.Query(); err != nil || a.Limit != 0 {
			t.Errorf("%s: Query after the limit event: %+v, %v; want the limit 0, disarmed", name, a, err)
		}
		messages(limit - 2) // on down to one receive left, unarmed
		if n := countSRQEvents(t, srq, asyncFor(t, f.ctx, quietWindow)); n != 0 {
			t.Errorf("%s: %d more limit events as the SRQ drained, without a new Arm: want none", name, n)
		}
	}
	// 20 receives, armed at 8: 12 messages leave 8, the 13th 7.
	f.srqPost(t, srq, 1000, 20)
	round("first arm", 20, 8)
	// One receive is left: refill to 17, above the new limit, and arm
	// again.
	f.srqPost(t, srq, 2000, 16)
	round("second arm", 17, 12)
	if a, err := srq.Query(); err != nil || a.Limit != 0 || a.MaxWR < 32 || a.MaxSGE < 1 {
		t.Errorf("Query at the end: %+v, %v", a, err)
	}
}

// ibv_destroy_srq(3) fails while a QP is associated with the SRQ: Close
// returns EBUSY, and the SRQ goes on working; once the last of its QPs is
// gone Close succeeds, and a second Close returns ErrClosed.
func TestSRQCloseUnderQPsIsEBUSY(t *testing.T) {
	f := setup(t)
	scq, rcq := f.newCQ(t, 16), f.newCQ(t, 16)
	srq := f.newSRQ(t, uverbs.SRQConfig{MaxWR: 8, MaxSGE: 1})
	r1 := f.qpOn(t, uverbs.RC, srq, scq, rcq, 1)
	r2 := f.qpOn(t, uverbs.RC, srq, scq, rcq, 1)
	s := f.qpOn(t, uverbs.RC, nil, scq, scq, 4)
	rdmatest.ConnectRC(t, s, r1)
	if err := srq.Close(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("Close with two QPs on the SRQ: %v, want EBUSY", err)
	}
	f.srqPost(t, srq, 7, 1)
	f.sendN(t, s, 1, 1)
	successes(t, scq, 1)
	if w := successes(t, rcq, 1)[0]; w.WRID != 7 || w.QPNum != r1.QPN() {
		t.Errorf("a receive after the refused Close: %+v, want wr_id 7 on QP %d", w, r1.QPN())
	}
	if a, err := srq.Query(); err != nil || a.MaxWR < 8 {
		t.Errorf("Query after the refused Close: %+v, %v", a, err)
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srq.Close(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("Close with one QP left on the SRQ: %v, want EBUSY", err)
	}
	f.srqPost(t, srq, 8, 1) // still open: it takes receives
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srq.Close(); err != nil {
		t.Fatalf("Close after its QPs: %v", err)
	}
	if err := srq.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	if _, err := srq.PostRecv([]uverbs.RecvWR{f.srqRecvWR(t, 9, 0)}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostRecv after Close: %v, want ErrClosed", err)
	}
	if _, err := srq.Query(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Query after Close: %v, want ErrClosed", err)
	}
}

// ibv_post_srq_recv(3): "It stops processing WRs from this list at the
// first failure (that can be detected immediately while requests are
// being posted), and returns this failing WR through bad_wr." A batch
// with a receive of more SGEs than MaxSGE stops there with EINVAL; one
// longer than the room left stops where the SRQ is full with ENOMEM; in
// each the error names the request. Nothing after the failure was
// posted: exactly the receives before it complete, in order, and the
// next message finds the SRQ empty (an RNR NAK, retried once, then
// RNR_RETRY_EXC_ERR).
func TestSRQPostStopsAtFirstFailure(t *testing.T) {
	f := setup(t)
	scq, rcq := f.newCQ(t, 256), f.newCQ(t, 256)
	srq := f.newSRQ(t, uverbs.SRQConfig{MaxWR: 16, MaxSGE: 1})
	size, maxSGE := int(srq.MaxWR()), int(srq.MaxSGE())
	if size < 16 || maxSGE < 1 {
		t.Fatalf("SRQ of %d receives of %d SGEs, asked 16 of 1", size, maxSGE)
	}
	if size > 200 {
		t.Fatalf("SRQ of %d receives, asked 16: the test's queues hold 200", size)
	}
	r := f.qpOn(t, uverbs.RC, srq, scq, rcq, 1)
	s := f.qpOn(t, uverbs.RC, nil, scq, scq, uint32(size)+1)
	connectSender(t, s, r, 1, 7)

	// Receive 0 has MaxSGE SGEs (the most it may), receive 1 one; then
	// one of MaxSGE+1, and one more that must not be posted.
	many := make([]uverbs.SGE, maxSGE+1)
	for j := range many {
		many[j] = rdmatest.SGE(t, f.mr, 768<<10+j*16, 16)
	}
	wrs := []uverbs.RecvWR{
		{WRID: 0, SGL: many[:maxSGE]},
		f.srqRecvWR(t, 1, 1),
		{WRID: 1 << 40, SGL: many},
		f.srqRecvWR(t, 1<<41, 2),
	}
	n, err := srq.PostRecv(wrs)
	wantErrAt(t, "a receive of MaxSGE+1 SGEs third", n, err, 2, unix.EINVAL)
	posted := n

	// Fill the SRQ, and 5 more.
	wrs = make([]uverbs.RecvWR, size-posted+5)
	for k := range wrs {
		wrs[k] = f.srqRecvWR(t, uint64(posted+k), posted+k)
	}
	n, err = srq.PostRecv(wrs)
	wantErrAt(t, "a batch 5 longer than the room left", n, err, size-posted, unix.ENOMEM)
	posted += n
	t.Logf("SRQ of %d: %d posted; %v", size, posted, err)
	if _, err := srq.PostRecv(wrs[:1]); !errors.Is(err, unix.ENOMEM) {
		t.Errorf("a receive into the full SRQ: %v, want ENOMEM", err)
	}

	// Exactly the posted receives complete, in order.
	f.sendN(t, s, 0, posted)
	successes(t, scq, posted)
	for k, w := range successes(t, rcq, posted) {
		if w.WRID != uint64(k) || w.QPNum != r.QPN() {
			t.Fatalf("receive %d: %+v, want wr_id %d on QP %d", k, w, k, r.QPN())
		}
	}
	f.sendN(t, s, uint64(posted), 1)
	if w := rdmatest.PollN(t, scq, 1)[0]; w.Status != cq.RNRRetryExcErr {
		t.Errorf("a message past the posted receives: %+v (%v), want %v: the SRQ held more than was posted", w, w.Status, cq.RNRRetryExcErr)
	}
	quiet(t, rcq, 50*time.Millisecond, "the SRQ is empty")
}

// The SRQ running empty (ibv_modify_qp(3): rnr_retry, "A 3 bits value of
// the total number of times that the QP will try to resend the packets
// when an RNR NACK was sent by the remote QP before reporting an error.
// The value 7 is special and specify to retry infinite times in case of
// RNR"): a sender that retries once fails with RNR_RETRY_EXC_ERR and its
// QP goes to the error state, its receiver untouched; a sender retrying
// for ever completes once a receive is posted to the SRQ, later.
func TestSRQEmptyRNR(t *testing.T) {
	f := setup(t)
	s1cq, s2cq, rcq, idle := f.newCQ(t, 8), f.newCQ(t, 8), f.newCQ(t, 8), f.newCQ(t, 8)
	srq := f.newSRQ(t, uverbs.SRQConfig{MaxWR: 8, MaxSGE: 1})
	r1, r2 := f.qpOn(t, uverbs.RC, srq, idle, rcq, 1), f.qpOn(t, uverbs.RC, srq, idle, rcq, 1)
	s1, s2 := f.qpOn(t, uverbs.RC, nil, s1cq, idle, 4), f.qpOn(t, uverbs.RC, nil, s2cq, idle, 4)
	connectSender(t, s1, r1, 1, 7)
	rdmatest.ConnectRC(t, s2, r2) // RNR retry 7

	f.sendN(t, s1, 1, 1)
	if w := rdmatest.PollN(t, s1cq, 1)[0]; w.Status != cq.RNRRetryExcErr || w.WRID != 1 {
		t.Errorf("a send to the empty SRQ, RNR retry 1: %+v (%v), want %v", w, w.Status, cq.RNRRetryExcErr)
	}
	for _, c := range []struct {
		qp   *uverbs.QP
		want uverbs.QPState
	}{{s1, uverbs.QPErr}, {r1, uverbs.QPRTS}} {
		if a, err := c.qp.Query(uverbs.QPAttrState); err != nil || a.State != c.want {
			t.Errorf("QP %d: %v, %v; want %v", c.qp.QPN(), a.State, err, c.want)
		}
	}

	f.sendN(t, s2, 2, 1)
	quiet(t, s2cq, 300*time.Millisecond, "a send to the empty SRQ, RNR retry 7")
	if a, err := s2.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPRTS {
		t.Errorf("the sender retrying for ever: %v, %v; want RTS", a.State, err)
	}
	f.srqPost(t, srq, 77, 1)
	if w := successes(t, s2cq, 1)[0]; w.WRID != 2 {
		t.Errorf("send completion %+v", w)
	}
	if w := successes(t, rcq, 1)[0]; w.WRID != 77 || w.QPNum != r2.QPN() || w.ByteLen != 16 {
		t.Errorf("the receive posted late: %+v, want wr_id 77, 16 bytes on QP %d", w, r2.QPN())
	}
	if got := binary.LittleEndian.Uint64(f.mem[srqRecvBase:]); got != 2 {
		t.Errorf("the receive holds message %d, want 2", got)
	}
	quiet(t, rcq, 50*time.Millisecond, "one message sent")
}

// A QP on an SRQ moved to the error state flushes only what it had
// taken, never the SRQ's receives: with none in flight, no flush
// completion comes, and another QP on the SRQ receives every one of them
// with its wr_id, in the order posted. ibv_get_async_event(3) lists
// "IBV_EVENT_QP_LAST_WQE_REACHED Last WQE Reached on a QP associated with
// an SRQ" (the IB spec's o11-5.2.5: raised when a QP on an SRQ is in the
// error state and has no receive left to complete): it may name only
// the QP in error, once.
//
// What rxe does (drivers/infiniband/sw/rxe/rxe_resp.c): a QP in the
// error state drops the packets that still come for it (rxe_recv.c's
// check_type_state), and never touches the SRQ. Before Bob Pearson's 2023
// patch (6.1), check_resource flushes only the receive the QP had in
// flight (qp->resp.wqe, its copy of the SRQ's entry) and raises no
// event; after it (6.12), flush_recv_queue raises LAST_WQE_REACHED once,
// when the receive task runs after the move to the error state, and
// returns before flushing anything for a QP on an SRQ. The harness sees
// none on 6.1 and one on 6.12: the event is required on rxe from 6.12,
// and on hardware (ConnectX raises it: the spec requires it); elsewhere
// (6.1, the mlx5 model) at most one may come.
func TestSRQQPErrorFlushesOnlyItsOwn(t *testing.T) {
	const k = 8
	f := setup(t)
	scq, rcq, idle := f.newCQ(t, 32), f.newCQ(t, 32), f.newCQ(t, 8)
	srq := f.newSRQ(t, uverbs.SRQConfig{MaxWR: 16, MaxSGE: 1})
	r1, r2 := f.qpOn(t, uverbs.RC, srq, idle, rcq, 1), f.qpOn(t, uverbs.RC, srq, idle, rcq, 1)
	s1, s2 := f.qpOn(t, uverbs.RC, nil, scq, idle, 16), f.qpOn(t, uverbs.RC, nil, scq, idle, 16)
	rdmatest.ConnectRC(t, s1, r1)
	rdmatest.ConnectRC(t, s2, r2)

	// r1 takes a receive first: it has been at work.
	f.srqPost(t, srq, 100, 1)
	f.sendN(t, s1, 100, 1)
	successes(t, scq, 1)
	if w := successes(t, rcq, 1)[0]; w.WRID != 100 || w.QPNum != r1.QPN() {
		t.Fatalf("r1's receive: %+v", w)
	}

	f.srqPost(t, srq, 0, k)
	rdmatest.Modify(t, r1, uverbs.QPAttr{State: uverbs.QPErr}, uverbs.QPAttrState)
	evs := asyncFor(t, f.ctx, 300*time.Millisecond)
	quiet(t, rcq, 100*time.Millisecond, "r1 moved to the error state")

	f.sendN(t, s2, 200, k)
	successes(t, scq, k)
	for i, w := range successes(t, rcq, k) {
		if w.WRID != uint64(i) || w.QPNum != r2.QPN() || w.ByteLen != 16 {
			t.Errorf("receive %d: %+v, want wr_id %d on QP %d (r2)", i, w, i, r2.QPN())
		}
		if got := binary.LittleEndian.Uint64(f.mem[srqRecvBase+i*srqSlot:]); got != 200+uint64(i) {
			t.Errorf("receive %d holds message %d, want %d", i, got, 200+i)
		}
	}
	evs = append(evs, asyncFor(t, f.ctx, 100*time.Millisecond)...)
	quiet(t, rcq, 50*time.Millisecond, "after the messages")

	lastWQE := 0
	for _, ev := range evs {
		h, ok := ev.QPHandle()
		switch {
		case ok && h == r1.EventHandle() && ev.Type == uverbs.EventQPLastWQEReached:
			lastWQE++
		case ok && h == r2.EventHandle():
			t.Errorf("an event about r2, which never left RTS: %v", ev)
		case ev.Kind() == uverbs.ElementSRQ:
			t.Errorf("an SRQ event: %v", ev)
		default:
			t.Logf("event %v", ev)
		}
	}
	var must bool
	switch {
	case rdmatest.Provider(t) == "rxe":
		must = testutil.KernelAtLeast(t, 6, 12)
	case !rdmatest.OnModel():
		must = true
	}
	t.Logf("LAST_WQE_REACHED events about r1: %d (required: %v)", lastWQE, must)
	if lastWQE > 1 || must && lastWQE != 1 {
		t.Errorf("%d LAST_WQE_REACHED events about the QP in error, want at most one (one here: %v)", lastWQE, must)
	}
}

// The same, with a receive in flight: a QP on an SRQ is moved to the
// error state while a 256 KiB message (256 packets of 1 KiB) is arriving
// on it, once its first bytes landed. The receive it took from the SRQ
// completes at most once (in full before the move, or flushed), never
// on another QP; every other receive of the SRQ stays there, for another
// QP to take in the order posted. Which of these the move meets is a race
// the test logs, not one it steers: on rxe 6.1 the message has landed
// whole by then (the post runs the requester, and the loopback
// responder, in the posting thread); on 6.12 it meets the message in
// flight, and the receive never completes at all: flush_recv_queue
// returns for a QP on an SRQ before it reaches qp->resp.wqe, so the
// receive is lost, not flushed (a QP with its own receive queue gets its
// flush). The mlx5 model delivers a message at once: the move comes
// after it.
func TestSRQQPErrorMidMessage(t *testing.T) {
	const k, big, bigOff = 8, 256 << 10, 256 << 10
	f := setup(t)
	s1cq, s2cq, rcq, idle := f.newCQ(t, 32), f.newCQ(t, 32), f.newCQ(t, 32), f.newCQ(t, 8)
	srq := f.newSRQ(t, uverbs.SRQConfig{MaxWR: 16, MaxSGE: 1})
	r1, r2 := f.qpOn(t, uverbs.RC, srq, idle, rcq, 1), f.qpOn(t, uverbs.RC, srq, idle, rcq, 1)
	s1, s2 := f.qpOn(t, uverbs.RC, nil, s1cq, idle, 4), f.qpOn(t, uverbs.RC, nil, s2cq, idle, 16)
	connectSender(t, s1, r1, 7, 1) // against r1 in error: two ACK timeouts, then RETRY_EXC_ERR
	rdmatest.ConnectRC(t, s2, r2)

	wrs := []uverbs.RecvWR{{WRID: 1000, SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, bigOff, big)}}}
	for i := range k {
		wrs = append(wrs, f.srqRecvWR(t, uint64(i), i))
	}
	if n, err := srq.PostRecv(wrs); n != len(wrs) || err != nil {
		t.Fatalf("posted %d of %d: %v", n, len(wrs), err)
	}
	src, dst := f.mem[3*bigOff:3*bigOff+big], f.mem[bigOff:bigOff+big]
	for i := range src {
		src[i] = byte(i%251) + 1 // never 0
	}
	clear(dst)
	if _, err := s1.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 3*bigOff, big)}}}); err != nil {
		t.Fatal(err)
	}
	// The move comes once the first packet landed, if it does within a
	// second: the likeliest moment to find the receive in flight.
	for end := time.Now().Add(time.Second); atomic.LoadUint32((*uint32)(unsafe.Pointer(&dst[0]))) == 0 && time.Now().Before(end); {
		runtime.Gosched()
	}
	rdmatest.Modify(t, r1, uverbs.QPAttr{State: uverbs.QPErr}, uverbs.QPAttrState)
	landed := atomic.LoadUint32((*uint32)(unsafe.Pointer(&dst[big-4]))) != 0
	time.Sleep(100 * time.Millisecond)

	f.sendN(t, s2, 200, k)
	successes(t, s2cq, k)
	var onR1, onR2 []cq.WC
	wcs := make([]cq.WC, 16)
	for end := time.Now().Add(10 * time.Second); len(onR2) < k; {
		if time.Now().After(end) {
			t.Fatalf("r2 received %d of %d in 10 s: %+v; r1: %+v", len(onR2), k, onR2, onR1)
		}
		n, err := rcq.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wcs[:n] {
			switch w.QPNum {
			case r1.QPN():
				onR1 = append(onR1, w)
			case r2.QPN():
				onR2 = append(onR2, w)
			default:
				t.Fatalf("a completion on neither QP: %+v", w)
			}
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	// s1's send ends: acknowledged, or retried out against the QP in
	// error (2 ACK timeouts of 67 ms).
	w1, ok := pollOne(s1cq, 15*time.Second)
	if !ok {
		a, err := s1.Query(uverbs.QPAttrState)
		t.Fatalf("s1's send to r1, moved to the error state with the message %s, has not completed in 15 s (s1 %v, %v; r1 completed %+v; %d bytes landed)",
			map[bool]string{true: "landed", false: "in flight"}[landed], a.State, err, onR1, landedBytes(dst))
	}
	quiet(t, rcq, 50*time.Millisecond, "after the messages")

	// r2 takes the SRQ's receives in the order posted, from the big one
	// if r1 never took it, else from wr_id 0.
	want := make([]uint64, 0, k)
	path := "r1 took the big receive before the move"
	if onR2[0].WRID == 1000 {
		want = append(want, 1000)
		path = "the move came before the message took a receive"
	}
	for i := 0; len(want) < k; i++ {
		want = append(want, uint64(i))
	}
	for i, w := range onR2 {
		if w.Status != cq.Success || w.WRID != want[i] || w.ByteLen != 16 {
			t.Errorf("r2's receive %d: %+v (%v), want wr_id %d, 16 bytes", i, w, w.Status, want[i])
		}
	}
	switch {
	case want[0] == 1000 && len(onR1) > 0:
		t.Errorf("r1 completed %+v, though the big receive went to r2", onR1)
	case len(onR1) > 1:
		t.Errorf("the receive r1 took completed %d times: %+v", len(onR1), onR1)
	case len(onR1) == 1:
		w := onR1[0]
		switch {
		case w.WRID != 1000:
			t.Errorf("r1 completed %+v: it took only the big receive", w)
		case w.Status == cq.WRFlushErr:
			path += ", and flushed it"
		case w.Status == cq.Success && w.ByteLen == big:
			path += ", and completed it whole"
			if w1.Status != cq.Success {
				t.Errorf("r1 received the message whole, but the send failed: %+v (%v)", w1, w1.Status)
			}
		default:
			t.Errorf("r1's receive: %+v (%v), want it whole or flushed", w, w.Status)
		}
	case want[0] != 1000:
		path += ", and never completed it"
	}
	t.Logf("%s; the send: %v; its last bytes had landed at the move: %v", path, w1.Status, landed)
}

// ibv_create_srq(3): "The function ibv_create_srq() will create an SRQ
// with at least the number of work requests and scatter elements
// requested": "the values of max_wr and max_sge will be greater than or
// equal to the values requested". MaxWR, MaxSGE and Query agree, from
// one receive of one SGE up to the device's own limits
// (ibv_query_device's max_srq_wr and max_srq_sge); a new SRQ has no
// limit armed.
func TestSRQCreateAtLeastRequested(t *testing.T) {
	f := setup(t)
	d, err := f.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device: max_srq %d, max_srq_wr %d, max_srq_sge %d", d.MaxSRQ, d.MaxSRQWR, d.MaxSRQSGE)
	if d.MaxSRQ < 1 || d.MaxSRQWR < 1 || d.MaxSRQSGE < 1 {
		t.Fatalf("the device offers no SRQ: %+v", d)
	}
	type req struct{ wr, sge int }
	reqs := []req{{1, 1}, {2, 1}, {7, 1}, {64, 1}, {100, 2}, {1000, 1}, {d.MaxSRQWR, 1}, {1, d.MaxSRQSGE}, {4, d.MaxSRQSGE}}
	for _, r := range reqs {
		if r.wr > d.MaxSRQWR || r.sge > d.MaxSRQSGE {
			continue
		}
		s, err := f.pd.NewSRQ(uverbs.SRQConfig{MaxWR: uint32(r.wr), MaxSGE: uint32(r.sge), UserValue: 42})
		if err != nil {
			t.Errorf("max wr %d, max sge %d: %v", r.wr, r.sge, err)
			continue
		}
		a, err := s.Query()
		if err != nil {
			t.Errorf("max wr %d, max sge %d: Query: %v", r.wr, r.sge, err)
		}
		if int(s.MaxWR()) < r.wr || int(s.MaxSGE()) < r.sge || int(a.MaxWR) < r.wr || int(a.MaxSGE) < r.sge || a.Limit != 0 || s.UserValue() != 42 || s.PD() != f.pd {
			t.Errorf("asked %d receives of %d SGEs: MaxWR %d, MaxSGE %d, Query %+v, UserValue %d",
				r.wr, r.sge, s.MaxWR(), s.MaxSGE(), a, s.UserValue())
		}
		if err := s.Close(); err != nil {
			t.Errorf("max wr %d, max sge %d: Close: %v", r.wr, r.sge, err)
		}
	}
}

// ibv_create_srq(3) fails ("EINVAL Invalid parameters") for a request
// above the device's limits (max_srq_wr, max_srq_sge), or of no receives
// or no SGEs, and leaves nothing behind: no fd, no kernel object.
func TestSRQCreateAboveLimitsIsEINVAL(t *testing.T) {
	f := setup(t)
	d, err := f.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFDLeak(t)
	var before map[string]uint64
	if rdmatest.DeviceName() == "rxe0" {
		before = rdmatest.RXECounts(t)
	}
	for _, c := range []uverbs.SRQConfig{
		{MaxWR: uint32(d.MaxSRQWR) + 1, MaxSGE: 1},
		{MaxWR: 1, MaxSGE: uint32(d.MaxSRQSGE) + 1},
		{MaxWR: 1 << 31, MaxSGE: 1},
		{MaxWR: 1, MaxSGE: 1 << 20},
		{MaxWR: 0, MaxSGE: 1},
		{MaxWR: 1, MaxSGE: 0},
	} {
		if s, err := f.pd.NewSRQ(c); !errors.Is(err, unix.EINVAL) {
			if s != nil {
				s.Close()
			}
			t.Errorf("max wr %d, max sge %d (device: %d, %d): %v, want EINVAL", c.MaxWR, c.MaxSGE, d.MaxSRQWR, d.MaxSRQSGE, err)
		}
	}
	if before != nil {
		if after := rdmatest.RXECounts(t); after["srq"] != before["srq"] {
			t.Errorf("rxe0's SRQs: %d before the refused creates, %d after", before["srq"], after["srq"])
		}
	}
	// The PD is whole: an SRQ within the limits is made, and closes.
	s, err := f.pd.NewSRQ(uverbs.SRQConfig{MaxWR: 4, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// ibv_post_srq_recv(3): "If a WR is being posted to a UD QP, the Global
// Routing Header (GRH) of the incoming message will be placed in the
// first 40 bytes of the buffer(s) in the scatter list." A UD QP that takes
// its receives from an SRQ: the datagram lands after the GRH, which
// names the sender's and receiver's GID, and the completion names the
// receiving QP and the sending one (SrcQP).
func TestSRQUDReceiveHasGRH(t *testing.T) {
	const qkey = 0x5151
	f := setup(t)
	ucq, rcq := f.newCQ(t, 16), f.newCQ(t, 16)
	srq := f.newSRQ(t, uverbs.SRQConfig{MaxWR: 8, MaxSGE: 1})
	sender := f.qpOn(t, uverbs.UD, nil, ucq, ucq, 4)
	recv := f.qpOn(t, uverbs.UD, srq, ucq, rcq, 4)
	rdmatest.ReadyUD(t, sender, qkey)
	rdmatest.ReadyUD(t, recv, qkey)
	gi := rdmatest.GIDIndex()
	gid := rdmatest.GID(t, gi)
	ah, err := f.pd.NewAH(uverbs.AHAttr{IsGlobal: true, Port: 1, GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: uint8(gi), HopLimit: 64}})
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	const off, n = 4096, 100
	clear(f.mem[off : off+uverbs.GRHSize+n])
	if _, err := srq.PostRecv([]uverbs.RecvWR{{WRID: 5, SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, off, uverbs.GRHSize+n)}}}); err != nil {
		t.Fatal(err)
	}
	msg := f.mem[8192 : 8192+n]
	for i := range msg {
		msg[i] = byte(i*7 + 3)
	}
	if _, err := sender.PostSend([]uverbs.SendWR{{WRID: 6, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 8192, n)}, AH: ah, RemoteQPN: recv.QPN(), RemoteQKey: qkey}}); err != nil {
		t.Fatal(err)
	}
	successes(t, ucq, 1)
	w := successes(t, rcq, 1)[0]
	if w.WRID != 5 || w.Opcode != cq.OpRecv || w.Flags&cq.WithGRH == 0 || w.ByteLen != uverbs.GRHSize+n ||
		w.QPNum != recv.QPN() || w.SrcQP != sender.QPN() {
		t.Errorf("UD receive through the SRQ: %+v; want wr_id 5, GRH, %d bytes, QP %d from %d", w, uverbs.GRHSize+n, recv.QPN(), sender.QPN())
	}
	if got := f.mem[off+uverbs.GRHSize : off+uverbs.GRHSize+n]; string(got) != string(msg) {
		t.Errorf("the datagram after the GRH: % x", got[:16])
	}
	grh, err := uverbs.ParseGRH(f.mem[off:])
	if err != nil {
		t.Fatal(err)
	}
	if grh.SGID != gid || grh.DGID != gid {
		t.Errorf("GRH %+v, want from and to %v", grh, gid)
	}
}
