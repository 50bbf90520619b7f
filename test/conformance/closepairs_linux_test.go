package conformance

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// The deadlines of TestClosePairs' calls: a Wait's or Serve's own
// context, and the time a close (which takes no context) is given. A call
// that has not returned pairSlack past its deadline fails the test with
// every goroutine's stack (issue [X] #57: every call returns within its
// deadline + 100 ms). A Wait or Serve that nothing in its pair wakes has
// the short deadline, which it runs to, so a round stays short; one that
// its pair must wake has the long one, which it must not run to.
const (
	pairWaitDeadline  = time.Second
	pairShortDeadline = 200 * time.Millisecond
	pairCloseDeadline = 3 * time.Second
	pairSlack         = 100 * time.Millisecond
)

// pairWorld is one round's objects: the fixture's context and channel,
// a receive CQ rq on the channel, armed, and a send CQ sq. With queued,
// one completion of rq's was polled and its event is queued in the
// channel, unread, and the QPs that made it are closed; sq is then on no
// channel. Without it, sq is on the channel too, both are armed, and
// nothing is queued.
type pairWorld struct {
	f      *fix
	sq, rq *cq.CQ
	queued bool
	got    *cq.CQ // what the round's Wait or TryWait returned
}

func newPairWorld(t *testing.T, queued bool) *pairWorld {
	t.Helper()
	w := &pairWorld{f: setup(t), queued: queued}
	var err error
	sqCfg := cq.Config{Size: 16}
	if !queued {
		sqCfg.Channel = w.f.ch
	}
	if w.sq, err = w.f.ctx.NewCQ(sqCfg); err != nil {
		t.Fatal(err)
	}
	if w.rq, err = w.f.ctx.NewCQ(cq.Config{Size: 16, Channel: w.f.ch}); err != nil {
		t.Fatal(err)
	}
	for _, q := range w.onChannel() {
		if err := q.ReqNotify(cq.NextCompletion); err != nil {
			t.Fatal(err)
		}
	}
	if !queued {
		return w
	}
	newQP := func(recv *cq.CQ) *uverbs.QP {
		qp, err := w.f.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: w.sq, RecvCQ: recv,
			Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return qp
	}
	a, b := newQP(w.sq), newQP(w.rq)
	rdmatest.ConnectRC(t, a, b)
	w.f.recv(t, b, 1, 1)
	w.f.send(t, a, 2, uverbs.WRSend, 0)
	rdmatest.PollN(t, w.rq, 1)
	rdmatest.PollN(t, w.sq, 1)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return w
}

// onChannel returns the world's CQs that use the channel.
func (w *pairWorld) onChannel() []*cq.CQ {
	if w.queued {
		return []*cq.CQ{w.rq}
	}
	return []*cq.CQ{w.sq, w.rq}
}

// pairCall is one side of a pair: a call, its deadline, and the errors
// it may return (a nil entry: success). cq.ErrClosed is uverbs.ErrClosed.
type pairCall struct {
	name     string
	deadline time.Duration
	fn       func(w *pairWorld) error
	allowed  []error
}

var (
	errDeadline = context.DeadlineExceeded
	errBusy     = syscall.EBUSY
)

func cqClose(allowed ...error) pairCall {
	return pairCall{"CQ.Close", pairCloseDeadline, func(w *pairWorld) error { return w.rq.Close() }, allowed}
}

func chClose(allowed ...error) pairCall {
	return pairCall{"Channel.Close", pairCloseDeadline, func(w *pairWorld) error { return w.f.ch.Close() }, allowed}
}

func ctxClose(allowed ...error) pairCall {
	return pairCall{"Context.Close", pairCloseDeadline, func(w *pairWorld) error { return w.f.ctx.Close() }, allowed}
}

func chWait(allowed ...error) pairCall { return chWaitFor(pairWaitDeadline, allowed...) }

// chWaitFor is chWait with the deadline d.
func chWaitFor(d time.Duration, allowed ...error) pairCall {
	return pairCall{"Channel.Wait", d, func(w *pairWorld) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		c, err := w.f.ch.Wait(ctx)
		w.got = c
		return err
	}, allowed}
}

func chTryWait(allowed ...error) pairCall {
	return pairCall{"Channel.TryWait", pairCloseDeadline, func(w *pairWorld) error {
		c, ok, err := w.f.ch.TryWait()
		if ok {
			w.got = c
		}
		return err
	}, allowed}
}

func chServe(allowed ...error) pairCall { return chServeFor(pairWaitDeadline, allowed...) }

// chServeFor is chServe with the deadline d.
func chServeFor(d time.Duration, allowed ...error) pairCall {
	return pairCall{"Channel.Serve", d, func(w *pairWorld) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return w.f.ch.Serve(ctx, w.onChannel(), nil, func(*cq.CQ, []cq.WC) error { return nil })
	}, allowed}
}

// onlyOne checks that of two calls that each close one object, one did
// and the other said ErrClosed.
func onlyOne(t *testing.T, _ *pairWorld, errs []error) {
	t.Helper()
	testutil.OnlyOne(t, "close", errs, cq.ErrClosed)
}

// TestClosePairs starts two calls of a closer and a waiter, or of two
// closers, on one world at the same moment, in every pairing issue [X]
// #57 lists, and checks that each returns within its deadline (+
// pairSlack) with one of the errors it may, and that the world then
// closes, every step of it bounded too. Each pair runs GOVERBS_CLOSEPAIRS
// rounds (5 by default), each on a context of its own.
func TestClosePairs(t *testing.T) {
	rounds := testutil.Rounds("GOVERBS_CLOSEPAIRS", 5)
	closed := cq.ErrClosed
	pairs := []struct {
		name   string
		queued bool
		a, b   pairCall
		check  func(t *testing.T, w *pairWorld, errs []error)
	}{
		// CQ.Close does not touch the channel: the Wait runs to its deadline.
		{name: "CQClose/Wait", a: cqClose(nil), b: chWaitFor(pairShortDeadline, errDeadline)},
		// Issue [X]'s sequence: the Wait delivers the event (and Close
		// says EBUSY until it is acknowledged) or Close takes the CQ first
		// and the event goes with it.
		{name: "CQClose/WaitQueued", queued: true, a: cqClose(nil, errBusy), b: chWaitFor(pairShortDeadline, nil, errDeadline),
			check: func(t *testing.T, w *pairWorld, errs []error) {
				if (errs[1] == nil) != errors.Is(errs[0], errBusy) {
					t.Errorf("CQ.Close %v beside Wait %v: want EBUSY exactly when the Wait delivered the event", errs[0], errs[1])
				}
			}},
		{name: "CQClose/CQClose", a: cqClose(nil, closed), b: cqClose(nil, closed), check: onlyOne},
		{name: "ChannelClose/Wait", a: chClose(nil), b: chWait(closed)},
		{name: "ChannelClose/WaitQueued", queued: true, a: chClose(nil), b: chWait(nil, closed)},
		{name: "ChannelClose/ChannelClose", a: chClose(nil, closed), b: chClose(nil, closed), check: onlyOne},
		{name: "ChannelClose/TryWait", queued: true, a: chClose(nil), b: chTryWait(nil, closed)},
		{name: "ContextClose/Wait", a: ctxClose(nil), b: chWait(closed)},
		{name: "ContextClose/WaitQueued", queued: true, a: ctxClose(nil), b: chWait(nil, closed)},
		{name: "ContextClose/CQClose", queued: true, a: ctxClose(nil), b: cqClose(nil, closed)},
		{name: "ContextClose/ChannelClose", a: ctxClose(nil), b: chClose(nil, closed)},
		{name: "ContextClose/ContextClose", a: ctxClose(nil, closed), b: ctxClose(nil, closed), check: onlyOne},
		{name: "Serve/ChannelClose", a: chServe(closed), b: chClose(nil)},
		{name: "Serve/ContextClose", a: chServe(closed), b: ctxClose(nil)},
		// Serve acknowledges what its Wait delivers: CQ.Close says EBUSY
		// only in between.
		{name: "Serve/CQCloseQueued", queued: true, a: chServeFor(pairShortDeadline, closed, errDeadline), b: cqClose(nil, errBusy)},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			for i := range rounds {
				if !t.Run(strconv.Itoa(i), func(t *testing.T) {
					w := newPairWorld(t, p.queued)
					limit := func(c pairCall) time.Duration { return c.deadline + pairSlack }
					errs := testutil.Together(t,
						testutil.Step{Name: p.a.name, Limit: limit(p.a), Fn: func() error { return p.a.fn(w) }},
						testutil.Step{Name: p.b.name, Limit: limit(p.b), Fn: func() error { return p.b.fn(w) }})
					t.Logf("%s: %v; %s: %v", p.a.name, errs[0], p.b.name, errs[1])
					for j, c := range []pairCall{p.a, p.b} {
						if !testutil.OneOf(errs[j], c.allowed...) {
							t.Errorf("%s: %v, want one of %v", c.name, errs[j], c.allowed)
						}
					}
					if w.got != nil && w.got != w.rq && (w.queued || w.got != w.sq) {
						t.Errorf("an event for CQ %d, not one of the world's", w.got.EventHandle())
					}
					if p.check != nil {
						p.check(t, w, errs)
					}
					w.close(t)
				}) {
					return
				}
			}
		})
	}
}

// close acknowledges what was delivered and closes everything, in order,
// each step bounded; a step may find its object already closed.
func (w *pairWorld) close(t *testing.T) {
	t.Helper()
	step := func(name string, fn func() error) {
		t.Helper()
		if err := testutil.Within(t, name, pairCloseDeadline+pairSlack, fn); err != nil && !errors.Is(err, cq.ErrClosed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, q := range []*cq.CQ{w.sq, w.rq} {
		if n := q.Unacked(); n > 0 {
			step("CQ.Ack", func() error { return q.Ack(n) })
		}
		step("CQ.Close", q.Close)
	}
	step("Channel.Close", w.f.ch.Close)
	// A Wait on the closed channel says so at once.
	err := testutil.Within(t, "Channel.Wait on the closed channel", pairWaitDeadline+pairSlack, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), pairWaitDeadline)
		defer cancel()
		_, err := w.f.ch.Wait(ctx)
		return err
	})
	if !errors.Is(err, cq.ErrClosed) {
		t.Errorf("Wait on the closed channel: %v, want ErrClosed", err)
	}
	step("MR.Close", w.f.mr.Close)
	step("PD.Close", w.f.pd.Close)
	step("Context.Close", w.f.ctx.Close)
}
