package reliability

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// A process that exits, or is killed, with a context, PDs, MRs, CQs on a
// channel, connected QPs and work in flight, and closes none of them,
// leaves nothing behind in the kernel: once it is gone, the kernel's
// resource counts of rxe0 (RDMA netlink RES_GET, what "rdma resource
// show" prints) are what they were before it started, and the counts
// rose while it ran, so they do see its objects. A second process then
// does the same again.
func TestProcessExitLeaksNothing(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	for _, role := range []string{"leak-exit", "leak-kill", "leak-exit"} {
		before := rdmatest.RXECounts(t)
		c := testutil.StartRole(t, role, nil)
		c.Expect(t, "READY", time.Minute)
		during := rdmatest.RXECounts(t)
		for _, k := range []string{"ctx", "pd", "cq", "qp", "mr"} {
			if _, ok := before[k]; ok && during[k] <= before[k] {
				t.Errorf("%s: %s count %d while the child runs, %d before: the counts miss its objects", role, k, during[k], before[k])
			}
		}
		var err error
		if role == "leak-kill" {
			err = c.Kill()
		} else {
			c.Stdin().Close() // the child exits when its stdin ends
			err = c.Wait()
		}
		out := c.Output()
		switch {
		case role == "leak-kill" && err == nil:
			t.Errorf("%s: the child survived SIGKILL", role)
		case role != "leak-kill" && err != nil:
			t.Errorf("%s: child: %v\n%s", role, err, out)
		}
		var after map[string]uint64
		if !testutil.WaitUntil(10*time.Second, func() bool { after = rdmatest.RXECounts(t); return cmp.Equal(before, after) }) {
			t.Errorf("%s: resources of rxe0 after the child exited (-before +after):\n%s\nwhile it ran: %v",
				role, cmp.Diff(before, after), during)
		} else {
			t.Logf("%s: before %v, while the child ran %v, after: the same as before", role, before, during)
		}
	}
}

// childLeak opens rxe0, makes one of everything, puts work in flight,
// prints READY, and then, with nothing closed, exits when its stdin ends
// (or dies of the parent's SIGKILL).
func childLeak(waitKill bool) error {
	c, err := uverbs.Open("rxe0")
	if err != nil {
		return err
	}
	pd, err := c.AllocPD()
	if err != nil {
		return err
	}
	buf, err := uverbs.AllocBuffer(1 << 20)
	if err != nil {
		return err
	}
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		return err
	}
	heap := make([]byte, 64<<10) // a Go-heap MR too
	if _, err := pd.RegMR(heap, uverbs.AccessLocalWrite); err != nil {
		return err
	}
	ch, err := c.NewCompChannel()
	if err != nil {
		return err
	}
	scq, err := c.NewCQ(cq.Config{Size: 256, Channel: ch})
	if err != nil {
		return err
	}
	rcq, err := c.NewCQ(cq.Config{Size: 256, Channel: ch})
	if err != nil {
		return err
	}
	if err := rcq.ReqNotify(cq.NextCompletion); err != nil {
		return err
	}
	mk := func(send, recv *cq.CQ) (*uverbs.QP, error) {
		return pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: send, RecvCQ: recv,
			Cap: uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
	}
	a, err := mk(scq, scq)
	if err != nil {
		return err
	}
	b, err := mk(rcq, rcq)
	if err != nil {
		return err
	}
	if err := connectRC(a, b); err != nil {
		return err
	}
	for i := 0; i < 32; i++ {
		sge, err := mr.SGE(4096*i, 4096)
		if err != nil {
			return err
		}
		if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{sge}}}); err != nil {
			return err
		}
	}
	// Sends beyond the posted receives stay in RNR retry, in flight.
	sge, err := mr.SGE(0, 4096)
	if err != nil {
		return err
	}
	for i := 0; i < 48; i++ {
		if _, err := a.PostSend([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{sge}}}); err != nil {
			return err
		}
	}
	// A goroutine parked on the channel, one on the async fd.
	go ch.Wait(context.Background())
	go c.WaitAsyncEvent(context.Background())
	fmt.Println("READY")
	if waitKill {
		select {}
	}
	bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes it
	os.Exit(0)
	return nil
}

// connectRC brings two RC QPs of rxe0 to RTS, each the other's peer, over
// GID index 1, without a testing.T (for children).
func connectRC(a, b *uverbs.QP) error {
	raw, err := os.ReadFile("/sys/class/infiniband/rxe0/ports/1/gids/1")
	if err != nil {
		return err
	}
	gid, err := uverbs.ParseGID(strings.TrimSpace(string(raw)))
	if err != nil {
		return err
	}
	ea := uverbs.Endpoint{QPN: a.QPN(), PSN: 1, GID: gid}
	eb := uverbs.Endpoint{QPN: b.QPN(), PSN: 1, GID: gid}
	opts := &uverbs.ConnectOptions{PathMTU: uverbs.MTU1024, MinRNRTimer: 1, GIDIndex: 1}
	if err := a.ConnectRC(ea, eb, opts); err != nil {
		return err
	}
	return b.ConnectRC(eb, ea, opts)
}
