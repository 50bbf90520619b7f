package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uverbs"
)

// pairDeadline is the deadline of each call TestClosePairs races: a
// wait's own context, and the time a close is given (Conn.Close waits up
// to Config.CloseWait, a second, for the peer). A call that has not
// returned 100 ms past it fails the test with every goroutine's stack
// (issue [X] #57).
const pairDeadline = 10 * time.Second

const pairLimit = pairDeadline + 100*time.Millisecond

// pairStep is a testutil.Step with pairLimit.
func pairStep(name string, fn func() error) testutil.Step {
	return testutil.Step{Name: name, Limit: pairLimit, Fn: fn}
}

// listenAny listens on a free port of rxe0's address (a round's own, so
// that no round waits for the kernel to let go of the last one's).
func listenAny(t *testing.T) *Listener {
	t.Helper()
	l, err := Listen(timeout(t), netip.AddrPortFrom(rxeIP, 0).String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// waitComp waits on c's completion channel for pairDeadline.
func waitComp(c *Conn, got **cq.CQ) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), pairDeadline)
		defer cancel()
		q, err := c.CompChannel().Wait(ctx)
		*got = q
		return err
	}
}

// connCloseWait races Conn.Close against a Wait on the Conn's completion
// channel, its CQ armed; with flush, a receive is posted, which Close's
// disconnect flushes, so an event comes while they run.
func connCloseWait(t *testing.T, flush bool) {
	l := listenAny(t)
	cli, srv := pair(t, l, nil)
	var b *buffer
	if flush {
		b = newBuffer(t, cli, 4096)
		if _, err := cli.QP().PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{b.sge(t, 0, 64)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cli.CQ().ReqNotify(cq.NextCompletion); err != nil {
		t.Fatal(err)
	}
	var got *cq.CQ
	errs := testutil.Together(t, pairStep("Conn.Close", cli.Close), pairStep("Channel.Wait", waitComp(cli, &got)))
	t.Logf("Conn.Close: %v; Channel.Wait: %v", errs[0], errs[1])
	if !flush {
		testutil.CheckOneOf(t, "Conn.Close", errs[0], nil)
		testutil.CheckOneOf(t, "Channel.Wait", errs[1], cq.ErrClosed)
	} else {
		// The Wait delivers the flush's event, and Close's CQ.Close says
		// EBUSY until it is acknowledged; or Close destroys the CQ first
		// and the event goes with it.
		testutil.CheckOneOf(t, "Conn.Close", errs[0], nil, syscall.EBUSY)
		testutil.CheckOneOf(t, "Channel.Wait", errs[1], nil, cq.ErrClosed)
		if (errs[1] == nil) != errors.Is(errs[0], syscall.EBUSY) {
			t.Errorf("Conn.Close %v beside Wait %v: want EBUSY exactly when the Wait delivered the event", errs[0], errs[1])
		}
	}
	if errs[1] == nil && got != cli.CQ() {
		t.Errorf("Wait returned another CQ")
	}
	// What Close left (a CQ with its event unacknowledged) closes once
	// the event is acknowledged.
	if n := cli.CQ().Unacked(); n > 0 {
		testutil.CloseAgain(t, "CQ.Ack", pairLimit, ErrClosed, func() error { return cli.CQ().Ack(n) })
	}
	testutil.CloseAgain(t, "CQ.Close", pairLimit, ErrClosed, cli.CQ().Close)
	testutil.CloseAgain(t, "Conn.Close again", pairLimit, ErrClosed, cli.Close)
	if b != nil {
		testutil.CloseAgain(t, "MR.Close", pairLimit, ErrClosed, b.mr.Close) // before the PD's last Conn closes
	}
	testutil.CloseAgain(t, "server's Conn.Close", pairLimit, ErrClosed, srv.Close)
	testutil.CloseAgain(t, "Listener.Close", pairLimit, ErrClosed, l.Close)
}

// TestClosePairs starts a close and a wait on one object, or two closes,
// at the same moment, and checks that each returns within pairDeadline
// (+ 100 ms) with one of the errors it may, and that what is left then
// closes in bounded time too. Each pair runs GOVERBS_CLOSEPAIRS rounds
// (5 by default).
func TestClosePairs(t *testing.T) {
	requireCM(t)
	rounds := testutil.Rounds("GOVERBS_CLOSEPAIRS", 5)
	pairs := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"ConnClose/CompChannelWait", func(t *testing.T) { connCloseWait(t, false) }},
		{"ConnClose/CompChannelWaitFlush", func(t *testing.T) { connCloseWait(t, true) }},
		{"ConnClose/ConnClose", func(t *testing.T) {
			l := listenAny(t)
			cli, srv := pair(t, l, nil)
			errs := testutil.Together(t, pairStep("Conn.Close", cli.Close), pairStep("Conn.Close", cli.Close))
			testutil.OnlyOne(t, "Conn.Close", errs, ErrClosed)
			testutil.CloseAgain(t, "server's Conn.Close", pairLimit, ErrClosed, srv.Close)
			testutil.CloseAgain(t, "Listener.Close", pairLimit, ErrClosed, l.Close)
		}},
		{"ListenerClose/Accept", func(t *testing.T) {
			l := listenAny(t)
			var c *Conn
			errs := testutil.Together(t, pairStep("Listener.Close", l.Close), pairStep("Listener.Accept", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), pairDeadline)
				defer cancel()
				var err error
				c, err = l.Accept(ctx)
				return err
			}))
			t.Logf("Listener.Close: %v; Accept: %v", errs[0], errs[1])
			testutil.CheckOneOf(t, "Listener.Close", errs[0], nil)
			testutil.CheckOneOf(t, "Listener.Accept", errs[1], ErrClosed)
			if c != nil {
				c.Close()
			}
			testutil.CloseAgain(t, "Listener.Close again", pairLimit, ErrClosed, l.Close)
		}},
		{"ListenerClose/ListenerClose", func(t *testing.T) {
			l := listenAny(t)
			testutil.OnlyOne(t, "Listener.Close", testutil.Together(t, pairStep("Listener.Close", l.Close), pairStep("Listener.Close", l.Close)), ErrClosed)
		}},
		{"EventChannelClose/Wait", func(t *testing.T) {
			ch := newChannel(t)
			id, err := ch.NewID(PortSpaceTCP)
			if err != nil {
				t.Fatal(err)
			}
			var ev *Event
			errs := testutil.Together(t, pairStep("EventChannel.Close", ch.Close), pairStep("EventChannel.Wait", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), pairDeadline)
				defer cancel()
				var err error
				ev, err = ch.Wait(ctx)
				return err
			}))
			t.Logf("EventChannel.Close: %v; Wait: %v", errs[0], errs[1])
			testutil.CheckOneOf(t, "EventChannel.Close", errs[0], nil)
			testutil.CheckOneOf(t, "EventChannel.Wait", errs[1], ErrClosed)
			if ev != nil {
				t.Errorf("an event on an ID that did nothing: %v", ev.Type)
			}
			testutil.CloseAgain(t, "ID.Close", pairLimit, ErrClosed, id.Close)
			testutil.CloseAgain(t, "EventChannel.Close again", pairLimit, ErrClosed, ch.Close)
		}},
		{"EventChannelClose/EventChannelClose", func(t *testing.T) {
			ch := newChannel(t)
			testutil.OnlyOne(t, "EventChannel.Close", testutil.Together(t, pairStep("EventChannel.Close", ch.Close), pairStep("EventChannel.Close", ch.Close)), ErrClosed)
		}},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			for i := range rounds {
				if !t.Run(strconv.Itoa(i), p.run) {
					return
				}
			}
		})
	}
}
