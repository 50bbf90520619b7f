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

// The RDMA device is deleted ("rdma link delete rxe0") while a context,
// a PD, an MR, a channel, CQs and a connected QP pair are open, a
// goroutine waits for a completion event and another for an async event.
//
// What happens depends on the driver. One that can disassociate a
// ucontext (mlx5, and rxe from the kernels that gave it
// disassociate_ucontext) is torn down at once: the kernel queues
// DEVICE_FATAL on the async fd, the channel fd reports EIO, every later
// command fails, and goverbs, reading the event, fails the posts, arms
// and polls with uverbs.ErrDeviceFatal. rxe on Linux 6.1 and 6.12
// cannot: ib_uverbs's remove_one waits for every open file of the
// device to close, so the deletion blocks, the device vanishes from
// RDMA netlink and its char
// device is removed, and everything already open keeps working until
// the application closes it. The test proves whichever contract the
// kernel has, and in both: waiters end with an error instead of hanging,
// Close releases everything (the deletion then completes), nothing
// panics, and no fd is left open.
func TestDeviceDeletedWhileOpen(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.CheckFDLeak(t) // registered first: checked after every other cleanup
	delDone := make(chan error, 1)
	deleting := false
	t.Cleanup(func() {
		// The objects' cleanups ran: a pending deletion can finish now.
		if deleting {
			select {
			case err := <-delDone:
				if err != nil {
					t.Errorf("rdma link delete rxe0: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("rdma link delete rxe0 still blocked 30 s after everything was closed")
				return // rxe0 cannot be created again while the old one is half gone
			}
		}
		restoreRXE(t)
	})

	o := newObjects(t, 1<<16)
	scq, rcq := o.newCQ(t, 64), o.newCQ(t, 64)
	a, b := o.newQP(t, scq, scq, 16, false), o.newQP(t, rcq, rcq, 16, false)
	rdmatest.ConnectRC(t, a, b)
	// One message each way of the data path first: the objects work.
	exchange := func() error {
		if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{rdmatest.SGE(t, o.mr, 4096, 64)}}}); err != nil {
			return err
		}
		if _, err := a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{rdmatest.SGE(t, o.mr, 0, 64)}}}); err != nil {
			return err
		}
		return nil
	}
	if err := exchange(); err != nil {
		t.Fatal(err)
	}
	rdmatest.PollN(t, scq, 1)
	rdmatest.PollN(t, rcq, 1)

	// The waiters: one on the completion channel (an armed CQ that no QP
	// uses, so nothing will come), one on the async fd.
	idle := o.newCQ(t, 4)
	if err := idle.ReqNotify(cq.NextCompletion); err != nil {
		t.Fatal(err)
	}
	compDone := make(chan error, 1)
	compCtx, asyncCtx := ctxTimeout(t, 2*time.Minute), ctxTimeout(t, 2*time.Minute)
	go func() {
		c, err := o.ch.Wait(compCtx)
		if err == nil {
			c.Ack(1)
		}
		compDone <- err
	}()
	type asyncResult struct {
		types []uverbs.AsyncEventType
		err   error
	}
	asyncDone := make(chan asyncResult, 1)
	go func() {
		var r asyncResult
		for {
			ev, err := o.ctx.WaitAsyncEvent(asyncCtx)
			if err != nil {
				r.err = err
				break
			}
			ev.Ack()
			r.types = append(r.types, ev.Type)
			if ev.Type == uverbs.EventDeviceFatal {
				break
			}
		}
		asyncDone <- r
	}()

	// Delete rxe0 in the background: on rxe it blocks until we close.
	deleting = true
	go func() { delDone <- netlink.RDMALinkDel("rxe0") }()
	if !testutil.WaitUntil(10*time.Second, func() bool { ok, err := rxePresent(); return err == nil && !ok }) {
		t.Fatal("rxe0 still listed by RDMA netlink 10 s after its deletion began")
	}
	if !testutil.WaitUntil(10*time.Second, func() bool { _, err := os.Stat(testutil.DevicePath); return err != nil }) {
		t.Errorf("%s still there 10 s after the deletion began", testutil.DevicePath)
	}
	if c, err := uverbs.Open("rxe0"); err == nil {
		c.Close()
		t.Error("opening rxe0 while it is being deleted worked")
	} else {
		t.Logf("open during the deletion: %v", err)
	}

	var disassociated bool
	select {
	case err := <-delDone:
		delDone <- err // for the cleanup
		disassociated = true
	case <-time.After(3 * time.Second):
	}

	if disassociated {
		t.Log("the kernel disassociated the context: the deletion finished with it open")
		select {
		case err := <-compDone:
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("completion wait after the device went: %v, want an error from the device", err)
			}
			t.Logf("completion wait: %v", err)
		case <-time.After(10 * time.Second):
			t.Error("completion wait still blocked 10 s after the device went")
		}
		select {
		case r := <-asyncDone:
			if len(r.types) == 0 || r.types[len(r.types)-1] != uverbs.EventDeviceFatal {
				t.Errorf("async events %v (then %v), want DEVICE_FATAL", r.types, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Error("no DEVICE_FATAL async event 10 s after the device went")
		}
		// Every command fails now, with an error, not a panic.
		if pd, err := o.ctx.AllocPD(); err == nil {
			pd.Close()
			t.Error("alloc pd on a disassociated context worked")
		}
		if _, err := o.ctx.NewCQ(cq.Config{Size: 4}); err == nil {
			t.Error("create cq on a disassociated context worked")
		}
		// The data path too, though it may never enter the kernel: the
		// Context read the DEVICE_FATAL before the waiter got it, and
		// failed its QPs and CQs (Poll once the ring is empty).
		if err := scq.ReqNotify(cq.NextCompletion); !errors.Is(err, uverbs.ErrDeviceFatal) {
			t.Errorf("req notify cq on a disassociated context: %v, want ErrDeviceFatal", err)
		}
		if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 3, SGL: []uverbs.SGE{rdmatest.SGE(t, o.mr, 4096, 64)}}}); !errors.Is(err, uverbs.ErrDeviceFatal) {
			t.Errorf("post recv on a disassociated context: %v, want ErrDeviceFatal", err)
		}
		if _, err := a.PostSend([]uverbs.SendWR{{WRID: 4, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{rdmatest.SGE(t, o.mr, 0, 64)}}}); !errors.Is(err, uverbs.ErrDeviceFatal) {
			t.Errorf("post send on a disassociated context: %v, want ErrDeviceFatal", err)
		}
		wcs := make([]cq.WC, 16)
		var perr error
		for i := 0; i < 100 && perr == nil; i++ { // the ring's pages are zapped: empty, or what they held
			_, perr = rcq.Poll(wcs)
		}
		if !errors.Is(perr, uverbs.ErrDeviceFatal) {
			t.Errorf("poll cq on a disassociated context: %v, want ErrDeviceFatal", perr)
		}
	} else {
		t.Log("the deletion waits for the application to close the device (no disassociate_ucontext)")
		// The waiters are still parked: nothing told them anything.
		select {
		case err := <-compDone:
			t.Fatalf("completion wait ended with no event and no close: %v", err)
		case r := <-asyncDone:
			t.Fatalf("async wait ended with no close: %v, %v", r.types, r.err)
		default:
		}
		devs, err := uverbs.Devices()
		t.Logf("devices listed during the deletion: %v, %v", devs, err)
		// What is open still works, data path included.
		if _, err := o.ctx.QueryPort(1); err != nil {
			t.Errorf("query port on the open context: %v", err)
		}
		if err := exchange(); err != nil {
			t.Errorf("posting on the open QPs: %v", err)
		}
		got := drain(t, scq, 100*time.Millisecond)
		t.Logf("the exchange during the deletion: %d send completions (%v)", len(got), statuses(got))
	}

	// Close everything: the waiters end, the deletion completes.
	o.closeAll()
	if !disassociated && len(o.errs) > 0 {
		t.Errorf("closing while the deletion waits: %v", o.errs)
	}
	if disassociated {
		t.Logf("closing a disassociated device: %v", o.errs)
	}
	select {
	case err := <-compDone:
		if !disassociated && !errors.Is(err, cq.ErrClosed) {
			t.Errorf("completion wait after Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("completion wait still blocked 10 s after its channel was closed")
	}
	if !disassociated {
		select {
		case r := <-asyncDone:
			if !errors.Is(r.err, uverbs.ErrClosed) {
				t.Errorf("async wait after Close: %v, %v; want ErrClosed", r.types, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Error("async wait still blocked 10 s after its context was closed")
		}
		select {
		case err := <-delDone:
			delDone <- err
			if err != nil {
				t.Errorf("rdma link delete rxe0: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("rdma link delete rxe0 still blocked 20 s after everything was closed")
		}
	}
	// Calls after Close fail with ErrClosed, second Closes too.
	if _, err := o.ctx.AllocPD(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("alloc pd after close: %v", err)
	}
	if _, err := scq.Poll(make([]cq.WC, 1)); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("poll after close: %v", err)
	}
	if _, err := a.PostSend(nil); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("post send after close: %v", err)
	}
	if err := o.ctx.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second close: %v", err)
	}
}

func statuses(wcs []cq.WC) []cq.Status {
	out := make([]cq.Status, len(wcs))
	for i, w := range wcs {
		out[i] = w.Status
	}
	return out
}
