package reliability

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// roles are the parts this test binary plays in a process of its own
// (testutil.StartRole), by name.
var roles = testutil.Roles{
	"leak-exit": func([]string) error { return childLeak(false) },
	"leak-kill": func([]string) error { return childLeak(true) },
	"memlock":   func([]string) error { return childMemlock() },
}

func TestMain(m *testing.M) { roles.Main(m) }

// rxePresent reports whether RDMA netlink lists rxe0.
func rxePresent() (bool, error) {
	devs, err := netlink.RDMADevices()
	if err != nil {
		return false, err
	}
	for _, d := range devs {
		if d.Name == "rxe0" {
			return true, nil
		}
	}
	return false, nil
}

// restoreRXE makes sure rxe0 exists on d0 and is ready for the packages
// that run after this one: it creates it if it is missing, then waits for
// its uverbs device (the path testutil.DevicePath names), an active port
// and its IPv4 GID.
func restoreRXE(t *testing.T) {
	t.Helper()
	ok, err := rxePresent()
	if err != nil {
		t.Errorf("restoring rxe0: %v", err)
		return
	}
	if !ok {
		if err := netlink.RDMALinkAdd("rxe0", "rxe", "d0"); err != nil {
			t.Errorf("restoring rxe0: %v", err)
			return
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if last = rxeReady(); last == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("rxe0 not ready 20 s after re-creating it: %v", last)
}

// rxeReady says why rxe0 is not yet usable, or nil: its char device is
// the one the other tests use, and rdmatest.DeviceReady.
func rxeReady() error {
	if _, err := os.Stat(testutil.DevicePath); err != nil {
		return err
	}
	_, err := rdmatest.DeviceReady("rxe0")
	return err
}

// drain polls q until it has been empty for quiet, and returns what came.
func drain(t *testing.T, q *cq.CQ, quiet time.Duration) []cq.WC {
	t.Helper()
	var out []cq.WC
	buf := make([]cq.WC, 64)
	last := time.Now()
	for time.Since(last) < quiet {
		n, err := q.Poll(buf)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out = append(out, buf[:n]...)
			last = time.Now()
			continue
		}
		time.Sleep(time.Millisecond)
	}
	return out
}

// objects is one test's device and what it made, closed in order (QPs,
// MRs, CQs, the PD, the channel, the context) when the test ends unless
// the test closed them first.
type objects struct {
	ctx  *uverbs.Context
	pd   *uverbs.PD
	ch   *cq.Channel
	buf  *uverbs.Buffer
	mr   *uverbs.MR
	cqs  []*cq.CQ
	qps  []*uverbs.QP
	errs []error // from closeAll
}

func newObjects(t *testing.T, bufSize int) *objects {
	t.Helper()
	testutil.RequireDevice(t, testutil.DevicePath)
	o := &objects{}
	var err error
	if o.ctx, err = uverbs.Open("rxe0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.closeAll() })
	if o.pd, err = o.ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if o.ch, err = o.ctx.NewCompChannel(); err != nil {
		t.Fatal(err)
	}
	if o.buf, err = uverbs.AllocBuffer(bufSize); err != nil {
		t.Fatal(err)
	}
	if o.mr, err = o.pd.RegMR(o.buf.Bytes(), rdmatest.AllAccess); err != nil {
		t.Fatal(err)
	}
	return o
}

func (o *objects) newCQ(t *testing.T, size int) *cq.CQ {
	t.Helper()
	q, err := o.ctx.NewCQ(cq.Config{Size: size, Channel: o.ch})
	if err != nil {
		t.Fatal(err)
	}
	o.cqs = append(o.cqs, q)
	return q
}

func (o *objects) newQP(t *testing.T, send, recv *cq.CQ, depth uint32, sigAll bool) *uverbs.QP {
	t.Helper()
	qp, err := o.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: send, RecvCQ: recv, SigAll: sigAll,
		Cap: uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	o.qps = append(o.qps, qp)
	return qp
}

// closeAll closes everything still open, children first, and keeps the
// errors other than ErrClosed.
func (o *objects) closeAll() {
	keep := func(err error) {
		if err != nil && !errors.Is(err, uverbs.ErrClosed) {
			o.errs = append(o.errs, err)
		}
	}
	for _, q := range o.qps {
		keep(q.Close())
	}
	if o.mr != nil {
		keep(o.mr.Close())
	}
	for _, q := range o.cqs {
		q.Ack(q.Unacked())
		keep(q.Close())
	}
	if o.pd != nil {
		keep(o.pd.Close())
	}
	if o.ch != nil {
		keep(o.ch.Close())
	}
	if o.ctx != nil {
		keep(o.ctx.Close())
	}
	if o.buf != nil {
		o.buf.Close()
	}
}

// ctxTimeout is a context that ends after d or when the test does.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
