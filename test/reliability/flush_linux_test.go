package reliability

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// flushWRs is how many receives and how many sends each flush test posts.
const flushWRs = 96

// postFlushLoad posts flushWRs receives and flushWRs sends on qp; only
// every third send is signaled. The receive wr_ids are 1..n, the sends'
// 1001..1000+n.
func postFlushLoad(t *testing.T, o *objects, qp *uverbs.QP) (signaled map[uint64]bool) {
	t.Helper()
	signaled = map[uint64]bool{}
	for i := 0; i < flushWRs; i++ {
		id := uint64(1 + i)
		if _, err := qp.PostRecv([]uverbs.RecvWR{{WRID: id, SGL: []uverbs.SGE{rdmatest.SGE(t, o.mr, 8192+i*64, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < flushWRs; i++ {
		id := uint64(1001 + i)
		var flags uverbs.SendFlags
		if i%3 == 0 {
			flags = uverbs.SendSignaled
			signaled[id] = true
		}
		if _, err := qp.PostSend([]uverbs.SendWR{{WRID: id, Opcode: uverbs.WRSend, Flags: flags,
			SGL: []uverbs.SGE{rdmatest.SGE(t, o.mr, 0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	return signaled
}

// checkFlushed checks that every posted request completed exactly once:
// each receive and each send, unsignaled ones included (a request that
// completes in error always gets a completion, signaled or not), with
// WR_FLUSH_ERR, but for the sends in allowed, which may end with the
// status that drove the QP to ERR.
func checkFlushed(t *testing.T, qp *uverbs.QP, sends, recvs []cq.WC, allowed map[cq.Status]int) {
	t.Helper()
	seen := map[uint64]int{}
	other := map[cq.Status]int{}
	for _, w := range append(append([]cq.WC(nil), sends...), recvs...) {
		seen[w.WRID]++
		if w.QPNum != qp.QPN() {
			t.Errorf("wr_id %d: qp_num %d, want %d", w.WRID, w.QPNum, qp.QPN())
		}
		if w.Status != cq.WRFlushErr {
			other[w.Status]++
		}
	}
	for s, n := range other {
		if n > allowed[s] {
			t.Errorf("%d completions with %v, want at most %d (the rest WR_FLUSH_ERR)", n, s, allowed[s])
		}
	}
	var missing, twice []uint64
	for _, base := range []uint64{1, 1001} {
		for i := uint64(0); i < flushWRs; i++ {
			switch seen[base+i] {
			case 0:
				missing = append(missing, base+i)
			case 1:
			default:
				twice = append(twice, base+i)
			}
			delete(seen, base+i)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d requests never completed: %v", len(missing), missing)
	}
	if len(twice) > 0 {
		t.Errorf("%d requests completed more than once: %v", len(twice), twice)
	}
	if len(seen) > 0 {
		t.Errorf("completions for wr_ids never posted: %v", keys(seen))
	}
	if len(recvs) != flushWRs || len(sends) != flushWRs {
		t.Errorf("%d receive and %d send completions, want %d of each", len(recvs), len(sends), flushWRs)
	}
}

func keys(m map[uint64]int) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// A QP moved to ERR with receives and sends posted (the sends stuck: the
// peer has no receive posted and RNR retries forever) flushes every one
// of them with WR_FLUSH_ERR, exactly once, unsignaled sends included;
// then nothing more comes. A send posted to the QP once it is in ERR is
// flushed too; a receive, on rxe, only when the kernel next looks at the
// QP (see the log and docs/RELIABILITY.md).
func TestFlushExactlyOnce(t *testing.T) {
	o := newObjects(t, 1<<16)
	scq, rcq, peer := o.newCQ(t, 512), o.newCQ(t, 512), o.newCQ(t, 512)
	a, b := o.newQP(t, scq, rcq, 128, false), o.newQP(t, peer, peer, 128, false)
	rdmatest.ConnectRC(t, a, b) // RNR retry 7: forever
	postFlushLoad(t, o, a)
	time.Sleep(20 * time.Millisecond) // the first send is on the wire, in RNR retries
	if n, _ := scq.Poll(make([]cq.WC, 1)); n != 0 {
		t.Fatal("a send completed with no receive posted at the peer")
	}
	rdmatest.Modify(t, a, uverbs.QPAttr{State: uverbs.QPErr}, uverbs.QPAttrState)
	sends, recvs := drain(t, scq, 300*time.Millisecond), drain(t, rcq, 50*time.Millisecond)
	checkFlushed(t, a, sends, recvs, nil)
	for _, w := range append(sends, recvs...) {
		if w.Opcode != 0 || w.ByteLen != 0 || w.Flags != 0 || w.Imm != 0 || w.SrcQP != 0 {
			t.Errorf("flushed completion with fields the man page leaves undefined set: %+v", w)
			break
		}
	}
	if got := drain(t, peer, 10*time.Millisecond); len(got) != 0 {
		t.Errorf("the peer got %d completions: %+v", len(got), got)
	}

	// Posting to a QP in ERR: a receive alone, then a send.
	if _, err := a.PostRecv([]uverbs.RecvWR{{WRID: 5001, SGL: []uverbs.SGE{rdmatest.SGE(t, o.mr, 0, 64)}}}); err != nil {
		t.Fatalf("post recv in ERR: %v", err)
	}
	late := drain(t, rcq, 300*time.Millisecond)
	t.Logf("a receive posted in ERR: %s", describe(late))
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 5002, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{rdmatest.SGE(t, o.mr, 0, 64)}}}); err != nil {
		t.Fatalf("post send in ERR: %v", err)
	}
	lateSend := drain(t, scq, 300*time.Millisecond)
	lateRecv := drain(t, rcq, 50*time.Millisecond)
	t.Logf("then an unsignaled send: %s on the send CQ, %s on the receive CQ", describe(lateSend), describe(lateRecv))
	late = append(append(late, lateSend...), lateRecv...)
	n := map[uint64]int{}
	for _, w := range late {
		n[w.WRID]++
		if w.Status != cq.WRFlushErr || (w.WRID != 5001 && w.WRID != 5002) {
			t.Errorf("completion of a request posted in ERR: %+v", w)
		}
	}
	if n[5002] != 1 {
		t.Errorf("the send posted in ERR completed %d times, want once (flushed)", n[5002])
	}
	if n[5001] > 1 {
		t.Errorf("the receive posted in ERR completed %d times", n[5001])
	}
	if got := append(drain(t, scq, 10*time.Millisecond), drain(t, rcq, 10*time.Millisecond)...); len(got) != 0 {
		t.Errorf("%d more completions: %+v", len(got), got)
	}
}

// A QP the transport drives to ERR: its peer does not exist, so the
// first send exhausts its retries (RETRY_EXC_ERR) and every other posted
// request is flushed, each exactly once; an async event may accompany it.
func TestFlushAfterRetryExceeded(t *testing.T) {
	o := newObjects(t, 1<<16)
	scq, rcq := o.newCQ(t, 512), o.newCQ(t, 512)
	a := o.newQP(t, scq, rcq, 128, false)
	gid := rdmatest.GID(t, 1)
	// Nobody has QPN 0xfff0; short timeouts and one retry.
	if err := a.ConnectRC(uverbs.Endpoint{QPN: a.QPN(), PSN: 1, GID: gid}, uverbs.Endpoint{QPN: 0xfff0, PSN: 1, GID: gid},
		&uverbs.ConnectOptions{PathMTU: uverbs.MTU1024, Access: rdmatest.AllAccess, GIDIndex: 1, MinRNRTimer: 1,
			Timeout: 8, RetryCnt: 1, RNRRetry: 1}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	postFlushLoad(t, o, a)
	var sends []cq.WC
	buf := make([]cq.WC, 64)
	for len(sends) < flushWRs && time.Since(start) < 30*time.Second {
		n, err := scq.Poll(buf)
		if err != nil {
			t.Fatal(err)
		}
		sends = append(sends, buf[:n]...)
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	t.Logf("send queue done after %v: %s", time.Since(start).Round(time.Millisecond), describe(sends))
	sends = append(sends, drain(t, scq, 200*time.Millisecond)...)
	st, err := a.Query(uverbs.QPAttrState)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != uverbs.QPErr {
		t.Errorf("QP state after retries ran out: %v, want ERR", st.State)
	}
	recvs := drain(t, rcq, 100*time.Millisecond)
	checkFlushed(t, a, sends, recvs, map[cq.Status]int{cq.RetryExcErr: 1})
	if len(sends) > 0 && (sends[0].WRID != 1001 || sends[0].Status != cq.RetryExcErr) {
		t.Errorf("first send completion %+v, want wr_id 1001 with RETRY_EXC_ERR", sends[0])
	}
	for {
		ev, ok, err := o.ctx.TryAsyncEvent()
		if err != nil || !ok {
			break
		}
		ev.Ack()
		t.Logf("async event: %v", ev.Type)
	}
}

// describe summarises completions as status counts.
func describe(wcs []cq.WC) string {
	if len(wcs) == 0 {
		return "no completions"
	}
	n := map[cq.Status]int{}
	for _, w := range wcs {
		n[w.Status]++
	}
	return fmt.Sprintf("%d completions %v", len(wcs), n)
}
