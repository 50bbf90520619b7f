package rdmacm

import (
	"context"
	"errors"
	"net/netip"
	"os"
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

// pairCheck fails t unless err is one of allowed (nil: success).
func pairCheck(t *testing.T, name string, err error, allowed ...error) {
	t.Helper()
	if !testutil.OneOf(err, allowed...) {
		t.Errorf("%s: %v, want one of %v", name, err, allowed)
	}
}

// onlyOne checks two closes of one object: one closed it, the other
// said ErrClosed.
func onlyOne(t *testing.T, what string, errs []error) {
	t.Helper()
	pairCheck(t, what, errs[0], nil, ErrClosed)
	pairCheck(t, what, errs[1], nil, ErrClosed)
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Errorf("two %ss: %v and %v, want one nil and one ErrClosed", what, errs[0], errs[1])
	}
}

// closeAgain closes once more what a round closed, within pairLimit; it
// may say ErrClosed.
func closeAgain(t *testing.T, name string, fn func() error) {
	t.Helper()
	if err := testutil.Within(t, name, pairLimit, fn); err != nil && !errors.Is(err, ErrClosed) {
		t.Errorf("%s: %v", name, err)
	}
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
		pairCheck(t, "Conn.Close", errs[0], nil)
		pairCheck(t, "Channel.Wait", errs[1], cq.ErrClosed)
	} else {
		// The Wait delivers the flush's event, and Close's CQ.Close says
		// EBUSY until it is acknowledged; or Close destroys the CQ first
		// and the event goes with it.
		pairCheck(t, "Conn.Close", errs[0], nil, syscall.EBUSY)
		pairCheck(t, "Channel.Wait", errs[1], nil, cq.ErrClosed)
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
		closeAgain(t, "CQ.Ack", func() error { return cli.CQ().Ack(n) })
	}
	closeAgain(t, "CQ.Close", cli.CQ().Close)
	closeAgain(t, "Conn.Close again", cli.Close)
	if b != nil {
		closeAgain(t, "MR.Close", b.mr.Close) // before the PD's last Conn closes
	}
	closeAgain(t, "server's Conn.Close", srv.Close)
	closeAgain(t, "Listener.Close", l.Close)
}

// TestClosePairs starts a close and a wait on one object, or two closes,
// at the same moment, and checks that each returns within pairDeadline
// (+ 100 ms) with one of the errors it may, and that what is left then
// closes in bounded time too. Each pair runs GOVERBS_CLOSEPAIRS rounds
// (5 by default).
func TestClosePairs(t *testing.T) {
	requireCM(t)
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("GOVERBS_CLOSEPAIRS")); err == nil && v > 0 {
		rounds = v
	}
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
			onlyOne(t, "Conn.Close", errs)
			closeAgain(t, "server's Conn.Close", srv.Close)
			closeAgain(t, "Listener.Close", l.Close)
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
			pairCheck(t, "Listener.Close", errs[0], nil)
			pairCheck(t, "Listener.Accept", errs[1], ErrClosed)
			if c != nil {
				c.Close()
			}
			closeAgain(t, "Listener.Close again", l.Close)
		}},
		{"ListenerClose/ListenerClose", func(t *testing.T) {
			l := listenAny(t)
			onlyOne(t, "Listener.Close", testutil.Together(t, pairStep("Listener.Close", l.Close), pairStep("Listener.Close", l.Close)))
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
			pairCheck(t, "EventChannel.Close", errs[0], nil)
			pairCheck(t, "EventChannel.Wait", errs[1], ErrClosed)
			if ev != nil {
				t.Errorf("an event on an ID that did nothing: %v", ev.Type)
			}
			closeAgain(t, "ID.Close", id.Close)
			closeAgain(t, "EventChannel.Close again", ch.Close)
		}},
		{"EventChannelClose/EventChannelClose", func(t *testing.T) {
			ch := newChannel(t)
			onlyOne(t, "EventChannel.Close", testutil.Together(t, pairStep("EventChannel.Close", ch.Close), pairStep("EventChannel.Close", ch.Close)))
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
