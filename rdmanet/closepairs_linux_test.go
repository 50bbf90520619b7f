package rdmanet_test

import (
	"io"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
)

// pairDeadline is the deadline of each call TestClosePairs races: a
// Read's own (SetReadDeadline), and the time a close is given (Close
// waits up to a second for the messages in flight, and the connection's
// rdmacm Close up to a second for the peer). A call that has not
// returned 100 ms past it fails the test with every goroutine's stack
// (issue [X] #57).
const pairDeadline = 10 * time.Second

const pairLimit = pairDeadline + 100*time.Millisecond

func pairStep(name string, fn func() error) testutil.Step {
	return testutil.Step{Name: name, Limit: pairLimit, Fn: fn}
}

// readFor returns a Read of one byte from c with pairDeadline as its
// read deadline.
func readFor(c net.Conn) func() error {
	return func() error {
		if err := c.SetReadDeadline(time.Now().Add(pairDeadline)); err != nil {
			return err
		}
		_, err := c.Read(make([]byte, 1))
		return err
	}
}

// TestClosePairs starts a Close and a wait on one object, or two Closes,
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
		// Close ends the Read waiting on the same Conn.
		{"ConnClose/Read", func(t *testing.T) {
			l := listen(t, nil)
			cli, srv := pair(t, l, nil)
			errs := testutil.Together(t, pairStep("Conn.Close", cli.Close), pairStep("Conn.Read", readFor(cli)))
			t.Logf("Conn.Close: %v; Read: %v", errs[0], errs[1])
			testutil.CheckOneOf(t, "Conn.Close", errs[0], nil)
			testutil.CheckOneOf(t, "Conn.Read", errs[1], net.ErrClosed)
			testutil.CloseAgain(t, "Conn.Close again", pairLimit, net.ErrClosed, cli.Close)
			testutil.CloseAgain(t, "server's Conn.Close", pairLimit, net.ErrClosed, srv.Close)
		}},
		// Close ends the peer's Read waiting: the fin says EOF, or the
		// disconnect a reset.
		{"ConnClose/PeerRead", func(t *testing.T) {
			l := listen(t, nil)
			cli, srv := pair(t, l, nil)
			errs := testutil.Together(t, pairStep("Conn.Close", cli.Close), pairStep("peer's Conn.Read", readFor(srv)))
			t.Logf("Conn.Close: %v; peer's Read: %v", errs[0], errs[1])
			testutil.CheckOneOf(t, "Conn.Close", errs[0], nil)
			testutil.CheckOneOf(t, "peer's Conn.Read", errs[1], io.EOF, syscall.ECONNRESET)
			testutil.CloseAgain(t, "server's Conn.Close", pairLimit, net.ErrClosed, srv.Close)
		}},
		{"ConnClose/ConnClose", func(t *testing.T) {
			l := listen(t, nil)
			cli, srv := pair(t, l, nil)
			errs := testutil.Together(t, pairStep("Conn.Close", cli.Close), pairStep("Conn.Close", cli.Close))
			testutil.CheckOneOf(t, "Conn.Close", errs[0], nil, net.ErrClosed)
			testutil.CheckOneOf(t, "Conn.Close", errs[1], nil, net.ErrClosed)
			if (errs[0] == nil) == (errs[1] == nil) {
				t.Errorf("two Conn.Closes: %v and %v, want one nil and one net.ErrClosed", errs[0], errs[1])
			}
			testutil.CloseAgain(t, "server's Conn.Close", pairLimit, net.ErrClosed, srv.Close)
		}},
		{"ListenerClose/Accept", func(t *testing.T) {
			l := listen(t, nil)
			var c net.Conn
			errs := testutil.Together(t, pairStep("Listener.Close", l.Close), pairStep("Listener.Accept", func() error {
				var err error
				c, err = l.Accept()
				return err
			}))
			t.Logf("Listener.Close: %v; Accept: %v", errs[0], errs[1])
			testutil.CheckOneOf(t, "Listener.Close", errs[0], nil)
			testutil.CheckOneOf(t, "Listener.Accept", errs[1], net.ErrClosed)
			if c != nil {
				c.Close()
			}
			testutil.CloseAgain(t, "Listener.Close again", pairLimit, net.ErrClosed, l.Close)
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
