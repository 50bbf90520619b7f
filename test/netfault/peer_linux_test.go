package netfault

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// The peer tests stream SENDs from host A (this process, rxe0) to host B
// (a process of its own on rxe1), take B away mid-stream, and look at
// what A, the survivor, sees.
//
// B receives into a memfd the test made and handed it: receive i lands in
// slot i of it, and the pages outlive B, so the test reads what B got
// even after B was killed. Message i carries i+1 and a pattern of i; a
// message lost, duplicated or reordered in what B took puts the wrong
// message in a slot, or leaves a hole before a full one.
const (
	peerMsgSize   = 64
	peerSlots     = 1 << 15 // the most messages one test sends
	peerWindow    = 32      // A's sends in flight
	peerRecvDepth = 256     // B's receives posted ahead
	peerPSN       = 0x1000
	// peerKillAfter is how many messages B reports received before the
	// test takes it away: the stream is under way.
	peerKillAfter = 200
	// peerSlack is what TCG's slowness may add to the retry budget.
	peerSlack = 10 * time.Second
)

// peerOpts is A's retry budget, short so that the tests are: an ACK
// timeout of 4.096 µs·2^14 (67 ms) and 2 retries. (A zero RetryCnt would
// mean the default, 7, which rxe takes as "retry forever".)
var peerOpts = uverbs.ConnectOptions{PathMTU: uverbs.MTU1024, Timeout: 14, RetryCnt: 2}

// peerRetryBudget is how long A's requester tries before it gives up on a
// silent peer: one ACK timeout for the first transmission and one for
// each retry. rxe counts the first from the last packet it sent and
// rounds each to jiffies, so the error comes near it, a little before or
// after (150 to 215 ms of a 201 ms budget on Linux 6.1 and 6.12).
func peerRetryBudget(o uverbs.ConnectOptions) time.Duration {
	timeout := time.Duration(4096<<o.Timeout) * time.Nanosecond
	return time.Duration(o.RetryCnt+1) * timeout
}

func init() {
	roles["peer-recv"] = peerRecv
}

// peerMessage is message i as A sends it and B must hold it in slot i.
func peerMessage(b []byte, i int) {
	binary.LittleEndian.PutUint64(b, uint64(i)+1)
	for j := 8; j < peerMsgSize; j++ {
		b[j] = byte(i)
	}
}

// peerRecv is host B: it receives A's stream into the memfd on fd 3,
// checking each message's place as it comes, and prints how many came.
// It prints its endpoint, reads A's from stdin, connects and prints
// READY, then receives until it is killed. With the argument "watch" it
// also watches its device's char device and prints GONE when it
// disappears (rxe sends no event: see TestPeerDeviceDeleted), keeps
// receiving until stdin says CLOSE, then closes everything, prints
// CLOSED and waits for stdin to end.
func peerRecv(args []string) error {
	watch := len(args) > 0 && args[0] == "watch"
	mem, err := unix.Mmap(3, 0, peerSlots*peerMsgSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap the slots: %w", err)
	}
	ctx, err := uverbs.Open(hostB.device)
	if err != nil {
		return err
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		return err
	}
	mr, err := pd.RegMR(mem, uverbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	scq, err := ctx.NewCQ(cq.Config{Size: 4})
	if err != nil {
		return err
	}
	rcq, err := ctx.NewCQ(cq.Config{Size: peerRecvDepth})
	if err != nil {
		return err
	}
	qp, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: scq, RecvCQ: rcq,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: peerRecvDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	post := func(i int) error {
		if i >= peerSlots {
			return nil
		}
		sge, err := mr.SGE(i*peerMsgSize, peerMsgSize)
		if err != nil {
			return err
		}
		_, err = qp.PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{sge}}})
		return err
	}
	for i := 0; i < peerRecvDepth; i++ {
		if err := post(i); err != nil {
			return err
		}
	}
	g, err := ctx.QueryGID(1, 1)
	if err != nil {
		return err
	}
	local := uverbs.Endpoint{QPN: qp.QPN(), PSN: peerPSN, GID: g.GID}
	fmt.Printf("ENDPOINT %s\n", local)

	stdin := make(chan string)
	go func() {
		s := bufio.NewScanner(os.Stdin)
		for s.Scan() {
			stdin <- s.Text()
		}
		close(stdin)
	}()
	var remote uverbs.Endpoint
	line, ok := <-stdin
	if !ok {
		return errors.New("stdin ended before A's endpoint")
	}
	if err := remote.UnmarshalText([]byte(strings.TrimPrefix(line, "ENDPOINT "))); err != nil {
		return err
	}
	opts := peerOpts
	opts.GIDIndex = 1
	if err := qp.ConnectRC(local, remote, &opts); err != nil {
		return err
	}
	fmt.Println("READY")

	want := make([]byte, peerMsgSize)
	wcs := make([]cq.WC, 64)
	next := 0
	lastPrint, lastStat := time.Now(), time.Now()
	gone := false
	for {
		n, err := rcq.Poll(wcs)
		if err != nil {
			return err
		}
		for _, w := range wcs[:n] {
			if w.Status != cq.Success || w.WRID != uint64(next) || w.ByteLen != peerMsgSize {
				return fmt.Errorf("receive %d: completion %+v", next, w)
			}
			peerMessage(want, next)
			if got := mem[next*peerMsgSize : (next+1)*peerMsgSize]; !bytes.Equal(got, want) {
				return fmt.Errorf("receive %d holds message %d: % x", next, binary.LittleEndian.Uint64(got)-1, got)
			}
			next++
			if err := post(next - 1 + peerRecvDepth); err != nil {
				return err
			}
		}
		if n > 0 && time.Since(lastPrint) > 10*time.Millisecond {
			fmt.Printf("RECV %d\n", next)
			lastPrint = time.Now()
		}
		if watch && !gone && time.Since(lastStat) > 5*time.Millisecond {
			lastStat = time.Now()
			if _, err := os.Stat(ctx.Device().Path); errors.Is(err, os.ErrNotExist) {
				gone = true
				fmt.Printf("GONE %d\n", next)
			}
		}
		select {
		case l, ok := <-stdin:
			if !ok || l == "CLOSE" { // the test's end closes stdin
				fmt.Printf("RECV %d\n", next)
				errs := errors.Join(qp.Close(), mr.Close(), scq.Close(), rcq.Close(), pd.Close(), ctx.Close())
				fmt.Printf("CLOSED %v\n", errs)
				for range stdin {
				}
				return unix.Munmap(mem)
			}
		default:
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// peerSurvivor is host A: an RC QP on rxe0 whose send CQ reports on a
// completion channel, and a buffer of a slot for each send in flight.
type peerSurvivor struct {
	e  *rcEnd
	ch *cq.Channel
	ok atomic.Int64 // sends completed successfully so far: the stream counts them
}

func openPeerSurvivor(t *testing.T) *peerSurvivor {
	t.Helper()
	s := &peerSurvivor{e: &rcEnd{h: hostA}}
	e := s.e
	var err error
	fail := func(what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %s: %v", hostA, what, err)
		}
	}
	e.ctx, err = uverbs.Open(hostA.device)
	fail("open")
	t.Cleanup(s.close)
	e.pd, err = e.ctx.AllocPD()
	fail("alloc PD")
	e.buf, err = uverbs.AllocBuffer(peerWindow * peerMsgSize)
	fail("buffer")
	e.mr, err = e.pd.RegMR(e.buf.Bytes(), uverbs.AccessLocalWrite)
	fail("reg MR")
	s.ch, err = e.ctx.NewCompChannel()
	fail("completion channel")
	e.scq, err = e.ctx.NewCQ(cq.Config{Size: 2 * peerWindow, Channel: s.ch})
	fail("send CQ")
	e.rcq, err = e.ctx.NewCQ(cq.Config{Size: 4})
	fail("recv CQ")
	e.qp, err = e.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: e.scq, RecvCQ: e.rcq,
		Cap: uverbs.QPCap{MaxSendWR: peerWindow + 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	fail("QP")
	return s
}

// close closes what is still open, children first, as the test's end.
func (s *peerSurvivor) close() { s.closeAll(func(string, error) {}) }

// closeAll closes what is still open, children first (the channel after
// its CQ, the context last), and hands report each error but ErrClosed
// (a second close).
func (s *peerSurvivor) closeAll(report func(what string, err error)) {
	e := s.e
	keep := func(what string, err error) {
		if err != nil && !errors.Is(err, uverbs.ErrClosed) {
			report(what, err)
		}
	}
	e.scq.Ack(e.scq.Unacked())
	keep("QP", e.qp.Close())
	keep("MR", e.mr.Close())
	keep("send CQ", e.scq.Close())
	keep("recv CQ", e.rcq.Close())
	keep("channel", s.ch.Close())
	keep("PD", e.pd.Close())
	keep("buffer", e.buf.Close())
	keep("context", e.ctx.Close())
}

// peerStream is what the stream saw: every send completion in the
// order it came, when the first error came, and the Waits.
type peerStream struct {
	posted   int
	wcs      []cq.WC
	firstErr time.Time
	waits    int
	// errWait is whether the first error was found by the poll that
	// follows a Wait: the goroutine was parked when it came. Then
	// errParked and errWoke say when that Wait parked and woke.
	errWait            bool
	errParked, errWoke time.Time
	err                error
}

// stream sends message after message, peerWindow in flight, until a send
// completes in error; then it posts nothing more and waits for the rest
// to complete. Between completions it parks on the completion channel:
// it is the goroutine that must wake when the peer goes.
func (s *peerSurvivor) stream(ctx context.Context) (r peerStream) {
	e := s.e
	buf := e.buf.Bytes()
	wcs := make([]cq.WC, peerWindow)
	failed := false
	afterWait := false // no poll since the last Wait
	var parked, woke time.Time
	for {
		for !failed && r.posted-len(r.wcs) < peerWindow && r.posted < peerSlots {
			off := (r.posted % peerWindow) * peerMsgSize
			peerMessage(buf[off:off+peerMsgSize], r.posted)
			sge, err := e.mr.SGE(off, peerMsgSize)
			if err != nil {
				r.err = err
				return r
			}
			if _, err := e.qp.PostSend([]uverbs.SendWR{{WRID: uint64(r.posted), Opcode: uverbs.WRSend,
				Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge}}}); err != nil {
				r.err = fmt.Errorf("post send %d: %w", r.posted, err)
				return r
			}
			r.posted++
		}
		poll := func() (int, error) {
			n, err := e.scq.Poll(wcs)
			for _, w := range wcs[:n] {
				switch {
				case w.Status == cq.Success:
					s.ok.Add(1)
				case !failed:
					failed, r.firstErr = true, time.Now()
					r.errWait, r.errParked, r.errWoke = afterWait, parked, woke
				}
			}
			afterWait = false
			r.wcs = append(r.wcs, wcs[:n]...)
			return n, err
		}
		n, err := poll()
		if err != nil {
			r.err = err
			return r
		}
		if failed && len(r.wcs) >= r.posted {
			return r
		}
		if r.posted == peerSlots && len(r.wcs) == r.posted {
			r.err = errors.New("the stream ran out of slots before the peer went")
			return r
		}
		if n > 0 {
			continue
		}
		// Arm, poll what came meanwhile, and only then park.
		if err := e.scq.ReqNotify(cq.NextCompletion); err != nil {
			r.err = err
			return r
		}
		if n, err = poll(); err != nil {
			r.err = err
			return r
		}
		if n > 0 {
			continue // the top of the loop posts, or returns if all are in
		}
		parked = time.Now()
		c, err := s.ch.Wait(ctx)
		woke, afterWait = time.Now(), true
		if err != nil {
			r.err = err
			return r
		}
		c.Ack(1)
		r.waits++
	}
}

// peerCase is one test's setup: B started and connected, A streaming.
type peerCase struct {
	a         *peerSurvivor
	b         *testutil.Proc
	recv      atomic.Int64 // the messages B reported received
	slots     *os.File
	fds       int               // the test process's fds before A opened rxe0
	counts    map[string]uint64 // rxe0's resources before A opened it
	done      chan peerStream
	startedAt time.Time
}

// startPeerCase makes the memfd, starts B with args, opens A, connects
// the two and starts the stream; it returns once B has received
// peerKillAfter messages.
func startPeerCase(t *testing.T, args ...string) *peerCase {
	t.Helper()
	fd, err := unix.MemfdCreate("netfault-slots", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	pc := &peerCase{slots: os.NewFile(uintptr(fd), "netfault-slots"), done: make(chan peerStream, 1)}
	t.Cleanup(func() { pc.slots.Close() })
	if err := pc.slots.Truncate(peerSlots * peerMsgSize); err != nil {
		t.Fatal(err)
	}
	pc.b = runHost(t, "peer-recv", []*os.File{pc.slots}, func(l string) bool {
		v, ok := strings.CutPrefix(l, "RECV ")
		if ok {
			n, _ := strconv.Atoi(v)
			pc.recv.Store(int64(n))
		}
		return ok
	}, args...)
	var eb uverbs.Endpoint
	if err := eb.UnmarshalText([]byte(pc.b.Expect(t, "ENDPOINT ", 30*time.Second))); err != nil {
		t.Fatal(err)
	}

	pc.fds = testutil.OpenFDs(t)
	pc.counts = rdmatest.RXECounts(t)
	pc.a = openPeerSurvivor(t)
	ea := uverbs.Endpoint{QPN: pc.a.e.qp.QPN(), PSN: peerPSN, GID: hostA.gid(t)}
	opts := peerOpts
	opts.GIDIndex = 1
	if err := pc.a.e.qp.ConnectRC(ea, eb, &opts); err != nil {
		t.Fatalf("%s: %v", hostA, err)
	}
	if _, err := fmt.Fprintf(pc.b.Stdin(), "ENDPOINT %s\n", ea); err != nil {
		t.Fatal(err)
	}
	pc.b.Expect(t, "READY", 30*time.Second)
	t.Logf("connected: %s QPN %#x, %s QPN %#x; retry budget %v (timeout %d, retry count %d)",
		hostA, ea.QPN, hostB, eb.QPN, peerRetryBudget(peerOpts), peerOpts.Timeout, peerOpts.RetryCnt)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	pc.startedAt = time.Now()
	go func() { pc.done <- pc.a.stream(ctx) }()
	t.Cleanup(func() { cancel(); <-pc.done }) // the survivor's objects outlive the stream
	pc.waitRecv(t, peerKillAfter)
	return pc
}

// waitRecv waits until B reports n messages received.
func (pc *peerCase) waitRecv(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for pc.recv.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s received %d messages in 30 s, want %d; its output:\n%s", hostB, pc.recv.Load(), n, pc.b.Output())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// await waits for the stream to end, at most the retry budget and the
// slack after lost, the moment the peer stopped answering.
func (pc *peerCase) await(t *testing.T, lost time.Time) peerStream {
	t.Helper()
	bound := peerRetryBudget(peerOpts) + peerSlack
	select {
	case r := <-pc.done:
		pc.done <- r // for the cleanup
		if r.err != nil {
			t.Fatalf("%s's stream: %v", hostA, r.err)
		}
		return r
	case <-time.After(time.Until(lost.Add(bound))):
		t.Fatalf("%s's stream still waits %v after the peer went (the retry budget is %v)", hostA, bound, peerRetryBudget(peerOpts))
	}
	return peerStream{}
}

// checkSurvivor checks what A saw after the peer stopped answering at
// lost: each send completed exactly once, in order; the ones before the
// first error successfully, the first error RETRY_EXC_ERR within the
// retry budget (and the slack), the rest WR_FLUSH_ERR; the goroutine
// parked on the completion channel woke for it; the QP is in ERR and a
// post to it is flushed (or refused); every send A saw succeed is in
// B's slot for it, and B holds nothing else but the messages after
// them, in order. (A send's success says that the message is in B's
// memory, not that B's application took it: B may go with completions
// in its CQ.)
func (pc *peerCase) checkSurvivor(t *testing.T, r peerStream, lost time.Time) {
	t.Helper()
	budget := peerRetryBudget(peerOpts)
	succeeded := 0
	for succeeded < len(r.wcs) && r.wcs[succeeded].Status == cq.Success {
		succeeded++
	}
	counts := map[cq.Status]int{}
	for _, w := range r.wcs {
		counts[w.Status]++
	}
	t.Logf("%s: %d sends posted, %d completions %v; the first error %v after the peer went (retry budget %v); %d Waits in all",
		hostA, r.posted, len(r.wcs), counts, r.firstErr.Sub(lost).Round(time.Millisecond), budget, r.waits)
	if r.errWait {
		t.Logf("%s: the stream's goroutine was parked on the completion channel when the error came: it parked at %+v and woke at %+v, counted from the peer's going",
			hostA, r.errParked.Sub(lost).Round(time.Millisecond), r.errWoke.Sub(lost).Round(time.Millisecond))
	} else {
		t.Errorf("%s: the first error was not what woke the stream's goroutine: it was not parked on the completion channel", hostA)
	}
	if succeeded < len(r.wcs) {
		w := r.wcs[succeeded]
		t.Logf("%s: the first failed send: wr_id %d, status %d (%v), vendor error %#x", hostA, w.WRID, w.Status, w.Status, w.VendorErr)
		if succeeded+1 < len(r.wcs) {
			w := r.wcs[succeeded+1]
			t.Logf("%s: the next: wr_id %d, status %d (%v)", hostA, w.WRID, w.Status, w.Status)
		}
	}
	if len(r.wcs) != r.posted {
		t.Errorf("%d completions for %d sends", len(r.wcs), r.posted)
	}
	for i, w := range r.wcs {
		if w.WRID != uint64(i) {
			t.Errorf("completion %d is wr_id %d: the sends completed out of order, twice or not at all", i, w.WRID)
			break
		}
	}
	for i, w := range r.wcs[succeeded:] {
		want := cq.WRFlushErr
		if i == 0 {
			want = cq.RetryExcErr
		}
		if w.Status != want {
			t.Errorf("send %d completed with %v, want %v", w.WRID, w.Status, want)
		}
	}
	if succeeded == len(r.wcs) {
		t.Error("no send failed")
	}
	if r.firstErr.Before(lost) {
		t.Errorf("the first error came %v before the peer went", lost.Sub(r.firstErr))
	}
	if d := r.firstErr.Sub(lost); d > budget+peerSlack {
		t.Errorf("the first error came %v after the peer went: more than the retry budget %v and %v", d, budget, peerSlack)
	}

	e := pc.a.e
	if st := e.qpState(t); st != uverbs.QPErr {
		t.Errorf("%s's QP is %v after the error, want ERR", hostA, st)
	}
	// A post now: the QP is in ERR.
	sge := rdmatest.SGE(t, e.mr, 0, peerMsgSize)
	late := uint64(1 << 40)
	if _, err := e.qp.PostSend([]uverbs.SendWR{{WRID: late, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge}}}); err != nil {
		t.Logf("%s: a send posted in ERR: %v", hostA, err)
	} else {
		got := rdmatest.PollN(t, e.scq, 1)
		t.Logf("%s: a send posted in ERR completes: wr_id %#x, %v", hostA, got[0].WRID, got[0].Status)
		if got[0].WRID != late || got[0].Status != cq.WRFlushErr {
			t.Errorf("the send posted in ERR completed %+v, want wr_id %#x with WR_FLUSH_ERR", got[0], late)
		}
	}
	if extra := peerPoll(t, e.scq, 100*time.Millisecond); len(extra) > 0 {
		t.Errorf("%d more completions: %+v", len(extra), extra)
	}
	for {
		ev, ok, err := e.ctx.TryAsyncEvent()
		if err != nil || !ok {
			break
		}
		ev.Ack()
		t.Logf("%s: async event %v", hostA, ev.Type)
	}

	// What B holds: a prefix of the stream, each message in its slot.
	mem := make([]byte, peerSlots*peerMsgSize)
	if _, err := pc.slots.ReadAt(mem, 0); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, peerMsgSize)
	held := 0
	for ; held < peerSlots; held++ {
		peerMessage(want, held)
		if !bytes.Equal(mem[held*peerMsgSize:(held+1)*peerMsgSize], want) {
			break
		}
	}
	for i := held * peerMsgSize; i < len(mem); i++ {
		if mem[i] != 0 {
			s := i / peerMsgSize
			t.Errorf("%s holds %d messages in order, then slot %d holds % x", hostB, held, s, mem[s*peerMsgSize:(s+1)*peerMsgSize])
			break
		}
	}
	reported := int(pc.recv.Load())
	t.Logf("%s: %d sends succeeded; %s holds messages 0 to %d in order (its receiver had taken %d from its CQ), %d of them not acknowledged to %s",
		hostA, succeeded, hostB, held-1, reported, held-succeeded, hostA)
	if held < succeeded {
		t.Errorf("%d sends succeeded, but %s holds only %d messages: lost", succeeded, hostB, held)
	}
	if held > r.posted || reported > held {
		t.Errorf("%s holds %d messages and reported %d, of %d sent", hostB, held, reported, r.posted)
	}
}

// checkReleased closes A's objects and checks that A leaked nothing: as
// many fds open as before A opened rxe0, and rxe0's resource counts as
// they were.
func (pc *peerCase) checkReleased(t *testing.T) {
	t.Helper()
	pc.a.closeAll(func(what string, err error) { t.Errorf("%s: close the %s: %v", hostA, what, err) })
	if got := testutil.OpenFDs(t); got != pc.fds {
		t.Errorf("%s: %d fds open after closing everything, %d before opening %s", hostA, got, pc.fds, hostA.device)
	}
	var after map[string]uint64
	deadline := time.Now().Add(5 * time.Second)
	for {
		after = rdmatest.RXECounts(t)
		if cmp.Equal(pc.counts, after) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !cmp.Equal(pc.counts, after) {
		t.Errorf("%s's resources after %s closed everything (-before +after):\n%s", hostA.device, hostA, cmp.Diff(pc.counts, after))
	} else {
		t.Logf("%s: %d fds and %s's resources %v, as before", hostA, pc.fds, hostA.device, after)
	}
}

// peerPoll polls q for d and returns what came.
func peerPoll(t *testing.T, q *cq.CQ, d time.Duration) []cq.WC {
	t.Helper()
	var out []cq.WC
	buf := make([]cq.WC, 16)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		n, err := q.Poll(buf)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:n]...)
	}
	return out
}

// Host B's process is killed (SIGKILL) in the middle of a stream of
// SENDs from host A. The kernel destroys B's QP with the process; B's
// rxe1 drops what A then sends to it, unanswered, so A's requester
// times out and retries: within its retry budget (3 ACK timeouts of
// 67 ms here) the oldest send in flight completes with RETRY_EXC_ERR,
// the QP goes to ERR and every other send in flight is flushed
// (WR_FLUSH_ERR), each exactly once and in order; the goroutine parked
// on A's completion channel wakes for them. Every send that completed
// successfully is in B's memory, in its place. A then closes everything
// and leaves no fd and no kernel object behind.
func TestPeerKilled(t *testing.T) {
	requireTwoHosts(t)
	pc := startPeerCase(t)
	killed := time.Now()
	if err := pc.b.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s killed %v into the stream, having reported %d messages", hostB, killed.Sub(pc.startedAt).Round(time.Millisecond), pc.recv.Load())
	r := pc.await(t, killed)
	pc.b.Drain() // all it printed is in
	pc.checkSurvivor(t, r, killed)
	pc.checkReleased(t) // before Wait closes the pipes to B: the fds are counted with them
	err := pc.b.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("%s: %v, want killed by SIGKILL; its output:\n%s", hostB, err, pc.b.Output())
	}
}

// Host B's rxe1 is deleted ("rdma link delete rxe1") in the middle of a
// stream of SENDs from host A, while B's process has it open.
//
// rxe (Linux 6.1, 6.12) cannot disassociate a user context from its
// device, so the deletion cannot take the device from B: it removes
// rxe1 from RDMA netlink and B's uverbs char device at once, then waits
// for B to close every file of the device, and until then B's QP works
// on, unaware (no async event comes). The test shows that: while the
// deletion waits, A's sends still succeed. What takes the device away
// from the survivor is B letting go; B, which sees its char device gone,
// does so when the test tells it, closes everything and stays alive.
// The deletion then completes, rxe1 no longer answers for B's QP, and A
// sees what it sees of a killed peer: RETRY_EXC_ERR within its retry
// budget, the rest flushed, each send exactly once and in order, its
// parked goroutine woken, nothing lost that it saw delivered, nothing
// leaked. (A kernel that disassociates instead ends B's QP at once: the
// test accepts that, and then times A's error from the deletion.)
// The test's end makes rxe1 on veth1 again.
func TestPeerDeviceDeleted(t *testing.T) {
	requireTwoHosts(t)
	delDone := make(chan error, 1)
	var deleting bool
	t.Cleanup(func() { peerRestoreB(t, deleting, delDone) }) // after B's process is gone
	pc := startPeerCase(t, "watch")

	before := pc.recv.Load()
	deleted := time.Now()
	deleting = true
	go func() { delDone <- netlink.RDMALinkDel(hostB.device) }()
	gone := pc.b.Expect(t, "GONE ", 10*time.Second)
	t.Logf("%s: GONE %s %v after the deletion began (%d messages when it began)", hostB, gone, time.Since(deleted).Round(time.Millisecond), before)
	devs, err := netlink.RDMADevices()
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, d := range devs {
		listed = listed || d.Name == hostB.device
	}

	// While the deletion waits for B, does the stream go on?
	var delErr error
	disassociated := false
	okBefore := pc.a.ok.Load()
	select {
	case delErr = <-delDone:
		disassociated = true
	case <-time.After(300 * time.Millisecond):
	}
	okAfter := pc.a.ok.Load()
	lost := deleted
	if disassociated {
		t.Logf("the deletion ended %v after it began, with %s's context open: %v", time.Since(deleted).Round(time.Millisecond), hostB, delErr)
	} else {
		t.Logf("the deletion still waits for %s %v after it began; rxe1 listed by RDMA netlink: %v; %s's sends that succeeded meanwhile: %d (%d to %d)",
			hostB, time.Since(deleted).Round(time.Millisecond), listed, hostA, okAfter-okBefore, okBefore, okAfter)
		if okAfter <= okBefore {
			t.Errorf("%s's sends stopped succeeding while the deletion waited for %s to close", hostA, hostB)
		}
		if listed {
			t.Errorf("RDMA netlink still lists %s while its deletion waits", hostB.device)
		}
		if _, err := fmt.Fprintln(pc.b.Stdin(), "CLOSE"); err != nil {
			t.Fatal(err)
		}
		closed := pc.b.Expect(t, "CLOSED ", 10*time.Second)
		lost = time.Now()
		if closed != "<nil>" {
			t.Errorf("%s closing its device during the deletion: %q", hostB, closed)
		}
		select {
		case delErr = <-delDone:
			t.Logf("the deletion ended %v after %s closed its device", time.Since(lost).Round(time.Millisecond), hostB)
		case <-time.After(20 * time.Second):
			t.Fatalf("the deletion of %s still waits 20 s after %s closed it", hostB.device, hostB)
		}
	}
	delDone <- delErr // for the cleanup
	if delErr != nil {
		t.Errorf("rdma link delete %s: %v", hostB.device, delErr)
	}

	r := pc.await(t, lost)
	pc.checkSurvivor(t, r, lost)
	pc.checkReleased(t)

	// B outlived its device, and ends when told.
	pc.b.Stdin().Close()
	err = pc.b.Wait()
	if out := pc.b.Output(); !disassociated && (err != nil || !strings.HasSuffix(out, "ROLE OK")) {
		t.Errorf("%s: %v; its output ends:\n%s", hostB, err, peerTail(out, 5))
	}
}

// peerTail is the last n lines of s.
func peerTail(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// peerRestoreB waits for a deletion of rxe1 that began to end, makes
// rxe1 on veth1 again if it is missing and waits until it is usable: its
// uverbs device there, its port active and its GID 1 host B's address,
// as the guest made it, for the tests after this one.
func peerRestoreB(t *testing.T, deleting bool, delDone chan error) {
	t.Helper()
	if deleting {
		select {
		case err := <-delDone:
			delDone <- err
		case <-time.After(30 * time.Second):
			t.Errorf("rdma link delete %s still blocked 30 s after %s's process ended", hostB.device, hostB)
			return // it cannot be made again while the old one is half gone
		}
	}
	devs, err := netlink.RDMADevices()
	if err != nil {
		t.Errorf("restoring %s: %v", hostB.device, err)
		return
	}
	present := false
	for _, d := range devs {
		present = present || d.Name == hostB.device
	}
	if !present {
		if err := netlink.RDMALinkAdd(hostB.device, "rxe", hostB.netdev); err != nil {
			t.Errorf("restoring %s: %v", hostB.device, err)
			return
		}
	}
	start := time.Now()
	var last error
	for time.Since(start) < 20*time.Second {
		if last = peerDeviceReady(hostB); last == nil {
			if !present {
				t.Logf("%s made again on %s, ready in %v", hostB.device, hostB.netdev, time.Since(start).Round(time.Millisecond))
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("%s not ready 20 s after making it again: %v", hostB.device, last)
}

// peerDeviceReady says why h's device is not yet usable, or nil: it is
// ready (rdmatest.DeviceReady) with h's address as its GID 1.
func peerDeviceReady(h host) error {
	g, err := rdmatest.DeviceReady(h.device)
	if err != nil {
		return err
	}
	if want := uverbs.GID(h.addr.As16()); g != want {
		return fmt.Errorf("GID 1 is %v, want %v", g, want)
	}
	return nil
}
