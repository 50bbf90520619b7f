package reliability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// loadMessages is how many messages each QP sends: GOVERBS_LOAD sets it
// (make vmtest RUN=TestManyQPsManyGoroutines VMFLAGS='-env GOVERBS_LOAD=100000').
func loadMessages(t *testing.T) int {
	if s := os.Getenv("GOVERBS_LOAD"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("GOVERBS_LOAD=%q", s)
		}
		return n
	}
	return 3000
}

// Many QPs and many goroutines drive one CQ: 8 connected RC pairs, every
// QP sending to its peer from its own goroutine (16 posters, batches of
// 1 to 4 requests, at most 32 in flight each), all 32 queues completing
// into one CQ that several goroutines reap at once, reposting receives as
// they go. Every send completes exactly once, every message is received
// exactly once (by its immediate), and nothing more comes. Reaped by
// pollers alone, and by Channel.Serve beside pollers.
func TestManyQPsManyGoroutinesOneCQ(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pollers int
		serve   bool
	}{
		{"4 pollers", 4, false},
		{"serve and 2 pollers", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) { runLoad(t, tc.pollers, tc.serve) })
	}
}

func runLoad(t *testing.T, pollers int, serve bool) {
	const (
		pairs  = 8
		qps    = 2 * pairs
		window = 32 // sends in flight per QP
		rqs    = 64 // receives posted per QP
	)
	msgs := loadMessages(t)
	o := newObjects(t, qps*rqs*64+4096)
	shared := o.newCQ(t, 2*qps*window+256) // every CQE that can be outstanding, with room
	q := make([]*uverbs.QP, qps)
	for i := 0; i < pairs; i++ {
		q[2*i], q[2*i+1] = o.newQP(t, shared, shared, rqs, false), o.newQP(t, shared, shared, rqs, false)
		rdmatest.ConnectRC(t, q[2*i], q[2*i+1])
	}
	index := map[uint32]int{} // QPN -> index
	for i, qp := range q {
		index[qp.QPN()] = i
	}
	sendSeen := make([][]atomic.Int32, qps) // [sender][seq]
	recvSeen := make([][]atomic.Int32, qps) // [receiver][imm]
	inflight := make([]atomic.Int32, qps)
	recvPosted := make([]atomic.Int64, qps)
	for i := range q {
		sendSeen[i] = make([]atomic.Int32, msgs)
		recvSeen[i] = make([]atomic.Int32, msgs)
	}
	recvSGEs := make([]uverbs.SGE, qps*rqs) // 64 bytes for each receive slot
	for k := range recvSGEs {
		recvSGEs[k] = rdmatest.SGE(t, o.mr, k*64, 64)
	}
	sendSGE := rdmatest.SGE(t, o.mr, qps*rqs*64, 64)
	recvSGE := func(i int, n int64) []uverbs.SGE {
		k := i*rqs + int(n%rqs)
		return recvSGEs[k : k+1]
	}
	postRecv := func(i int) error {
		n := recvPosted[i].Add(1) - 1
		if n >= int64(msgs) {
			return nil
		}
		_, err := q[i].PostRecv([]uverbs.RecvWR{{WRID: 1<<63 | uint64(i)<<32 | uint64(n), SGL: recvSGE(i, n)}})
		return err
	}
	for i := range q {
		for k := 0; k < rqs; k++ {
			if err := postRecv(i); err != nil {
				t.Fatal(err)
			}
		}
	}

	total := int64(2 * qps * msgs) // a send and a receive completion per message
	var reaped atomic.Int64
	done := make(chan struct{})
	var doneOnce sync.Once
	var errMu sync.Mutex
	var errs []error
	fail := func(err error) {
		errMu.Lock()
		if len(errs) < 20 {
			errs = append(errs, err)
		}
		errMu.Unlock()
		doneOnce.Do(func() { close(done) })
	}
	take := func(wcs []cq.WC) {
		for _, w := range wcs {
			i, ok := index[w.QPNum]
			switch {
			case !ok:
				fail(fmt.Errorf("completion of an unknown QP: %+v", w))
				continue
			case w.Status != cq.Success:
				fail(fmt.Errorf("QP %d: %v: %+v", i, w.Status, w))
				continue
			case w.Opcode&cq.RecvBit != 0:
				if w.WRID>>32 != 1<<31|uint64(i) || w.Imm >= uint32(msgs) {
					fail(fmt.Errorf("QP %d: receive %+v", i, w))
					continue
				}
				if recvSeen[i][w.Imm].Add(1) != 1 {
					fail(fmt.Errorf("QP %d: message %d received twice", i, w.Imm))
				}
				if err := postRecv(i); err != nil {
					fail(err)
				}
			default:
				seq := w.WRID & (1<<32 - 1)
				if w.WRID>>32 != uint64(i) || seq >= uint64(msgs) {
					fail(fmt.Errorf("QP %d: send %+v", i, w))
					continue
				}
				if sendSeen[i][seq].Add(1) != 1 {
					fail(fmt.Errorf("QP %d: send %d completed twice", i, seq))
				}
				inflight[i].Add(-1)
			}
		}
		if reaped.Add(int64(len(wcs))) >= total {
			doneOnce.Do(func() { close(done) })
		}
	}

	start := time.Now()
	var wg sync.WaitGroup
	// Posters.
	for i := range q {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			wrs := make([]uverbs.SendWR, 4)
			for seq := 0; seq < msgs; {
				k := min(1+seq%4, msgs-seq)
				for inflight[i].Load()+int32(k) > window {
					select {
					case <-done:
						return
					default:
						time.Sleep(50 * time.Microsecond)
					}
				}
				for j := 0; j < k; j++ {
					wrs[j] = uverbs.SendWR{WRID: uint64(i)<<32 | uint64(seq+j), Opcode: uverbs.WRSendWithImm,
						Flags: uverbs.SendSignaled, Imm: uint32(seq + j), SGL: []uverbs.SGE{sendSGE}}
				}
				inflight[i].Add(int32(k))
				if n, err := q[i].PostSend(wrs[:k]); err != nil {
					fail(fmt.Errorf("QP %d: posted %d of %d: %w", i, n, k, err))
					return
				}
				seq += k
			}
		}(i)
	}
	// Pollers, with batch sizes of their own.
	for p := 0; p < pollers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			wcs := make([]cq.WC, []int{1, 7, 16, 64}[p%4])
			for {
				select {
				case <-done:
					return
				default:
				}
				n, err := shared.Poll(wcs)
				if err != nil {
					fail(err)
					return
				}
				if n == 0 {
					time.Sleep(20 * time.Microsecond)
					continue
				}
				take(wcs[:n])
			}
		}(p)
	}
	// An event loop beside them.
	serveErr := make(chan error, 1)
	if serve {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-done; cancel() }()
		go func() {
			serveErr <- o.ch.Serve(ctx, []*cq.CQ{shared}, &cq.ServeOptions{Batch: 32}, func(_ *cq.CQ, wcs []cq.WC) error {
				take(wcs)
				return nil
			})
		}()
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		fail(fmt.Errorf("reaped %d of %d completions in 5 min", reaped.Load(), total))
	}
	wg.Wait()
	if serve {
		if err := <-serveErr; err != nil && ctxErr(err) == nil {
			t.Errorf("serve: %v", err)
		}
	}
	took := time.Since(start)
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	for i := range q {
		for seq := 0; seq < msgs; seq++ {
			if n := sendSeen[i][seq].Load(); n != 1 {
				t.Fatalf("QP %d: send %d completed %d times", i, seq, n)
			}
			if n := recvSeen[i][seq].Load(); n != 1 {
				t.Fatalf("QP %d: message %d received %d times", i, seq, n)
			}
		}
	}
	if extra := drain(t, shared, 100*time.Millisecond); len(extra) != 0 {
		t.Errorf("%d completions after all were counted: %+v", len(extra), extra[0])
	}
	t.Logf("%d QPs, %d posters, %d pollers (serve: %v): %d completions in %v (%.0f/s)",
		qps, qps, pollers, serve, total, took.Round(time.Millisecond), float64(total)/took.Seconds())
}

// ctxErr returns the context error err wraps, if any.
func ctxErr(err error) error {
	for _, e := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return e
		}
	}
	return nil
}
