package rdmanet_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/rdmanet"
)

// closeOpLimit bounds each try of the tests below: Close waits up to a
// second for the messages in flight, rdmacm's disconnect up to another.
const closeOpLimit = 5 * time.Second

// TestCloseEndsEveryCall closes a connection while one of its calls runs,
// again and again, and checks that the call ends with an error wrapping
// net.ErrClosed and nothing else (issue [W] #56): not EPIPE from the fin
// Close sends, not a flush status, not the peer's reset. Each call runs in
// a loop from before the Close until it fails, so tries catch it waiting
// (a Read with nothing to read, a Write the peer's flow control holds), in
// the middle of its work, and starting while Close runs. Each kind runs
// GOVERBS_CLOSEOPS tries (by default 200 for the Writes, where the fin
// Close sends once showed as EPIPE, and 25 for the others); make test runs
// it under the race detector too.
func TestCloseEndsEveryCall(t *testing.T) {
	requireCM(t)
	l := listen(t, nil)
	chunk := make([]byte, 64<<10)
	type call struct {
		name  string
		tries int // by default
		// peer runs on the server's end until it fails; nil: the peer
		// neither reads nor writes.
		peer func(srv *rdmanet.Conn)
		// op is the call under test, on the client's end.
		op func(cli, srv *rdmanet.Conn) func() error
	}
	drain := func(srv *rdmanet.Conn) { io.Copy(io.Discard, srv) }
	flood := func(srv *rdmanet.Conn) {
		for {
			if _, err := srv.Write(chunk); err != nil {
				return
			}
		}
	}
	oneSided := func(write bool) func(cli, srv *rdmanet.Conn) func() error {
		return func(cli, srv *rdmanet.Conn) func() error {
			r, err := srv.Register(make([]byte, 64<<10))
			if err != nil {
				t.Fatal(err)
			}
			tok := r.Token()
			p := make([]byte, 64<<10)
			return func() error {
				var err error
				if write {
					_, err = cli.WriteAt(tok, 0, p)
				} else {
					_, err = cli.ReadAt(tok, 0, p)
				}
				return err
			}
		}
	}
	calls := []call{
		{"Read/waiting", 25, nil, func(cli, _ *rdmanet.Conn) func() error {
			b := make([]byte, 1)
			return func() error { _, err := cli.Read(b); return err }
		}},
		{"Read/flowing", 25, flood, func(cli, _ *rdmanet.Conn) func() error {
			b := make([]byte, 32<<10)
			return func() error { _, err := cli.Read(b); return err }
		}},
		{"Write/held", 200, nil, func(cli, _ *rdmanet.Conn) func() error {
			return func() error { _, err := cli.Write(chunk); return err }
		}},
		{"Write/flowing", 200, drain, func(cli, _ *rdmanet.Conn) func() error {
			return func() error { _, err := cli.Write(chunk); return err }
		}},
		{"ReadAt", 25, nil, oneSided(false)},
		{"WriteAt", 25, nil, oneSided(true)},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			tries := testutil.Rounds("GOVERBS_CLOSEOPS", c.tries)
			wrong := 0
			for i := range tries {
				cc, sc := pair(t, l, nil)
				cli, srv := cc.(*rdmanet.Conn), sc.(*rdmanet.Conn)
				if c.peer != nil {
					go c.peer(srv)
				}
				op := c.op(cli, srv)
				ended := make(chan error, 1)
				started := make(chan struct{})
				go func() {
					close(started)
					for {
						if err := op(); err != nil {
							ended <- err
							return
						}
					}
				}()
				<-started
				// From at once (the call starting while Close runs) to
				// 2 ms later (the call waiting, or busy).
				time.Sleep(time.Duration(i%5) * 500 * time.Microsecond)
				if err := testutil.Within(t, "Conn.Close", closeOpLimit, cli.Close); err != nil {
					t.Errorf("try %d: Conn.Close: %v", i, err)
				}
				select {
				case err := <-ended:
					if !errors.Is(err, net.ErrClosed) {
						wrong++
						t.Errorf("try %d: %s ended by Close: %v, want net.ErrClosed", i, c.name, err)
					}
				case <-time.After(closeOpLimit):
					t.Fatalf("try %d: %s not ended %v after Close returned\n%s", i, c.name, closeOpLimit, testutil.Stacks())
				}
				testutil.CloseAgain(t, "server's Conn.Close", closeOpLimit, net.ErrClosed, srv.Close)
				if wrong > 10 {
					t.Fatalf("stopping after %d wrong errors in %d tries", wrong, i+1)
				}
			}
			t.Logf("%d tries, %d wrong errors", tries, wrong)
		})
	}
}
