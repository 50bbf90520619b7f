package conformance

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// Context.Close while other goroutines post, on rxe in the VM and on the
// mlx5 model (whose doorbell page a late post would fault on): the posts
// hold only their QP's send lock, which Close takes once for each live
// QP before it closes the fd and unmaps the provider's pages. Every post
// ends either before (posted, or refused for a full queue) or after
// (ErrClosed), with no fault; the objects' Close after it report
// ErrClosed.
func TestContextCloseRacesPostSend(t *testing.T) {
	for round := range 5 {
		c := rdmatest.Open(t)
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		q, err := c.NewCQ(cq.Config{Size: 256})
		if err != nil {
			t.Fatal(err)
		}
		mem := make([]byte, 4096)
		mr, err := pd.RegMR(mem, rdmatest.AllAccess)
		if err != nil {
			t.Fatal(err)
		}
		cfg := uverbs.QPConfig{Type: uverbs.RC, SendCQ: q, RecvCQ: q,
			Cap: uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
		a, err := pd.NewQP(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pd.NewQP(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rdmatest.ConnectRC(t, a, b)
		// Unsignaled writes: they leave no CQE, so the CQ cannot overrun.
		wr := []uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 8)},
			RemoteAddr: mr.Addr() + 2048, RKey: mr.RKey()}}
		var posted atomic.Int64
		errc := make(chan error, 4)
		for _, qp := range []*uverbs.QP{a, a, b, b} {
			go func() {
				for {
					_, err := qp.PostSend(wr)
					switch {
					case err == nil:
						posted.Add(1)
					case errors.Is(err, unix.ENOMEM): // full: the device is behind
						runtime.Gosched()
					default:
						errc <- err
						return
					}
				}
			}()
		}
		for deadline := time.Now().Add(10 * time.Second); posted.Load() < 50; {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d posts in 10 s", round, posted.Load())
			}
			runtime.Gosched()
		}
		if err := c.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		for range 4 {
			if err := <-errc; !errors.Is(err, uverbs.ErrClosed) {
				t.Errorf("round %d: a post after Close: %v, want ErrClosed", round, err)
			}
		}
		if _, err := b.PostRecv([]uverbs.RecvWR{{SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 8)}}}); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("round %d: PostRecv after Close: %v, want ErrClosed", round, err)
		}
		for _, x := range []interface{ Close() error }{a, b, mr, q, pd} {
			if err := x.Close(); !errors.Is(err, uverbs.ErrClosed) {
				t.Errorf("round %d: %T.Close after the context's: %v, want ErrClosed", round, x, err)
			}
		}
	}
}
