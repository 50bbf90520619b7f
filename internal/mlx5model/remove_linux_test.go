package mlx5model_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// TestRemoveDevice removes the device (Device.Remove: what the kernel does
// when a hardware driver that disassociates, mlx5_ib, lets go of it) while
// a context, PD, MR, CQs on two completion channels and a connected RC
// pair are open, one goroutine waits on a channel and one on the async fd.
// What the application sees, through goverbs:
//
//   - the channel waiter wakes with EIO; a channel that had an event
//     queued reports EIO too (the kernel dropped the event);
//   - the async waiter gets DEVICE_FATAL, and every later async wait EIO;
//   - every verb that is a command fails with EIO: alloc pd, create cq,
//     create comp channel, reg mr, create qp, create ah, modify qp, query
//     qp, resize cq, the queries;
//   - the data path cannot know (mlx5 posts, arms and polls in memory):
//     PostSend, PostRecv and ReqNotify succeed, and their doorbells land in
//     zapped pages the HCA no longer reads; Poll finds nothing more;
//   - every Close succeeds (the kernel answers destroys after the removal),
//     in any order, even a CQ before the QP that uses it and the PD first;
//     calls after Close fail with ErrClosed;
//   - nothing panics or hangs, no fd is left open, the model sees no fault.
func TestRemoveDevice(t *testing.T) {
	testutil.CheckFDLeak(t) // first: checked after every other cleanup
	t.Setenv(rdmatest.EnvDevice, rdmatest.ModelDevice)
	dev := rdmatest.Model(t)
	c := rdmatest.Open(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pd, err := c.AllocPD()
	must(err)
	buf, err := uverbs.AllocBuffer(1 << 16)
	must(err)
	defer buf.Close()
	mem := buf.Bytes()
	mr, err := pd.RegMR(mem, rdmatest.AllAccess)
	must(err)
	waitCh, err := c.NewCompChannel() // the parked waiter's
	must(err)
	queuedCh, err := c.NewCompChannel() // holds an unread event at the removal
	must(err)
	idle, err := c.NewCQ(4, cq.WithChannel(waitCh))
	must(err)
	scq, err := c.NewCQ(64, cq.WithChannel(queuedCh))
	must(err)
	rcq, err := c.NewCQ(64)
	must(err)
	newQP := func(send, recv *cq.CQ) *uverbs.QP {
		q, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: send, RecvCQ: recv,
			Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		must(err)
		return q
	}
	a, b := newQP(scq, scq), newQP(rcq, rcq)
	rdmatest.ConnectRC(t, a, b)
	gid := rdmatest.GIDIndex()
	dgid := rdmatest.GID(t, gid)
	exchange := func() error {
		if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{mr.SGE(4096, 64)}}}); err != nil {
			return err
		}
		_, err := a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{mr.SGE(0, 64)}}})
		return err
	}
	must(exchange())
	rdmatest.PollN(t, scq, 1)
	rdmatest.PollN(t, rcq, 1)

	// An event queued on queuedCh, not read: scq armed, one more exchange.
	events := dev.Stats().Events
	must(scq.ReqNotify(cq.NextCompletion))
	must(exchange())
	rdmatest.PollN(t, scq, 1)
	rdmatest.PollN(t, rcq, 1)
	for deadline := time.Now().Add(5 * time.Second); dev.Stats().Events == events; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no completion event 5 s after an armed CQ completed")
		}
	}

	// The waiters.
	must(idle.ReqNotify(cq.NextCompletion))
	waitCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	compDone := make(chan error, 1)
	go func() {
		q, err := waitCh.Wait(waitCtx)
		if err == nil {
			q.Ack(1)
		}
		compDone <- err
	}()
	type asyncResult struct {
		types      []uverbs.AsyncEventType
		err, after error
		afterTook  time.Duration
	}
	asyncDone := make(chan asyncResult, 1)
	go func() {
		var r asyncResult
		for {
			ev, err := c.WaitAsyncEvent(waitCtx)
			if err != nil {
				r.err = err
				break
			}
			ev.Ack()
			r.types = append(r.types, ev.Type)
			if ev.Type == uverbs.EventDeviceFatal {
				start := time.Now()
				_, r.after = c.WaitAsyncEvent(waitCtx) // nothing can come after it
				r.afterTook = time.Since(start)
				break
			}
		}
		asyncDone <- r
	}()
	time.Sleep(20 * time.Millisecond) // let them park (either way they must end)

	before := dev.Stats()
	if err := dev.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}

	isEIO := func(what string, err error, op string) {
		t.Helper()
		var oe *uverbs.OpError
		if !errors.As(err, &oe) || oe.Op != op || oe.Device != rdmatest.DeviceName() || !errors.Is(err, unix.EIO) {
			t.Errorf("%s: %v; want an *OpError for %q on %s wrapping EIO", what, err, op, rdmatest.DeviceName())
		}
	}
	select {
	case err := <-compDone:
		isEIO("the parked channel wait", err, "get cq event")
	case <-time.After(5 * time.Second):
		t.Error("the channel wait is still parked 5 s after the removal")
	}
	select {
	case r := <-asyncDone:
		if len(r.types) != 1 || r.types[0] != uverbs.EventDeviceFatal {
			t.Errorf("async events %v (then %v); want DEVICE_FATAL alone", r.types, r.err)
		}
		isEIO("an async wait after DEVICE_FATAL", r.after, "get async event")
		if r.afterTook > time.Second {
			t.Errorf("the async wait after DEVICE_FATAL took %v, want at once", r.afterTook)
		}
	case <-time.After(5 * time.Second):
		t.Error("no DEVICE_FATAL 5 s after the removal")
	}
	// The unread event was dropped with the channel's queue.
	_, _, err = queuedCh.TryWait()
	isEIO("TryWait on the channel with the dropped event", err, "get cq event")
	shortCtx, cancelShort := context.WithTimeout(context.Background(), 5*time.Second)
	start := time.Now()
	_, err = queuedCh.Wait(shortCtx)
	cancelShort()
	isEIO("Wait on that channel", err, "get cq event")
	if d := time.Since(start); d > time.Second {
		t.Errorf("Wait on a removed device's channel took %v, want at once", d)
	}
	_, _, err = waitCh.TryWait()
	isEIO("TryWait on the waiter's channel", err, "get cq event")
	// What read(2) says, under goverbs: EIO, as the kernel's channel
	// (ib_uverbs_event_read on a closed queue), not end of file (which
	// goverbs would also report as EIO).
	var raw [8]byte
	if n, err := unix.Read(queuedCh.FD(), raw[:]); err != unix.EIO {
		t.Errorf("read(2) on a removed device's channel: %d, %v; want EIO", n, err)
	}

	// Every command fails with EIO.
	for _, tc := range []struct {
		name, op string
		call     func() error
	}{
		{"AllocPD", "alloc pd", func() error { _, err := c.AllocPD(); return err }},
		{"NewCQ", "create cq", func() error { _, err := c.NewCQ(4); return err }},
		{"NewCompChannel", "create comp channel", func() error { _, err := c.NewCompChannel(); return err }},
		{"QueryDevice", "query device", func() error { _, err := c.QueryDevice(); return err }},
		{"QueryPort", "query port", func() error { _, err := c.QueryPort(1); return err }},
		{"QueryGID", "query gid", func() error { _, err := c.QueryGID(1, gid); return err }},
		{"TryAsyncEvent", "get async event", func() error { _, _, err := c.TryAsyncEvent(); return err }},
		{"RegMR", "reg mr", func() error { _, err := pd.RegMR(mem[8192:16384], uverbs.AccessLocalWrite); return err }},
		{"NewQP", "create qp", func() error {
			_, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: rcq, RecvCQ: rcq,
				Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			return err
		}},
		{"NewAH", "create ah", func() error {
			_, err := pd.NewAH(uverbs.AHAttr{IsGlobal: true, Port: 1,
				GRH: uverbs.GlobalRoute{DGID: dgid, SGIDIndex: uint8(gid), HopLimit: 64}})
			return err
		}},
		{"Modify", "modify qp", func() error { return a.Modify(&uverbs.QPAttr{State: uverbs.QPErr}, uverbs.QPAttrState) }},
		{"Query", "query qp", func() error { _, err := a.Query(uverbs.QPAttrState); return err }},
		{"Resize", "resize cq", func() error { return rcq.Resize(256) }},
	} {
		err := tc.call()
		isEIO(tc.name+" after the removal", err, tc.op)
		if err != nil {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	if _, err := dev.NewContext(); !errors.Is(err, unix.ENODEV) {
		t.Errorf("a new context on the removed device: %v, want ENODEV", err)
	}

	// The data path cannot know: it writes memory. Nothing reaches the HCA.
	if n, err := b.PostRecv([]uverbs.RecvWR{{WRID: 3, SGL: []uverbs.SGE{mr.SGE(4096, 64)}}}); n != 1 || err != nil {
		t.Errorf("PostRecv after the removal: %d, %v; want 1, nil (a ring write)", n, err)
	}
	if n, err := a.PostSend([]uverbs.SendWR{{WRID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{mr.SGE(0, 64)}}}); n != 1 || err != nil {
		t.Errorf("PostSend after the removal: %d, %v; want 1, nil (a ring write and a doorbell into a zapped page)", n, err)
	}
	if err := scq.ReqNotify(cq.NextCompletion); err != nil {
		t.Errorf("ReqNotify after the removal: %v; want nil (a doorbell record and a zapped page)", err)
	}
	time.Sleep(50 * time.Millisecond)
	wcs := make([]cq.WC, 4)
	for _, q := range []*cq.CQ{scq, rcq} {
		if n, err := q.Poll(wcs); n != 0 || err != nil {
			t.Errorf("Poll after the removal: %d (%+v), %v; want 0, nil", n, wcs[:n], err)
		}
	}
	after := dev.Stats()
	if after.SendDoorbells != before.SendDoorbells || after.ArmDoorbells != before.ArmDoorbells ||
		after.WQEs != before.WQEs || after.CQEs != before.CQEs || after.Events != before.Events || after.Faults != 0 {
		t.Errorf("the HCA worked after the removal: before %+v, after %+v", before, after)
	}

	// Close succeeds, in any order: the kernel destroyed everything already.
	for _, x := range []struct {
		name  string
		close func() error
	}{
		{"PD (first, under its MR and QPs)", pd.Close},
		{"MR", mr.Close},
		{"send CQ (before its QP)", scq.Close},
		{"recv CQ (before its QP)", rcq.Close},
		{"idle CQ", idle.Close},
		{"QP a", a.Close},
		{"QP b", b.Close},
		{"the waiter's channel", waitCh.Close},
		{"the channel with the dropped event", queuedCh.Close},
		{"context", c.Close},
	} {
		if err := x.close(); err != nil {
			t.Errorf("close %s after the removal: %v", x.name, err)
		}
	}
	if _, err := c.AllocPD(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("AllocPD after Close: %v, want ErrClosed", err)
	}
	if _, err := scq.Poll(wcs); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("Poll after Close: %v, want ErrClosed", err)
	}
	if _, err := a.PostSend(nil); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostSend after Close: %v, want ErrClosed", err)
	}
	if _, _, err := waitCh.TryWait(); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("TryWait after Close: %v, want ErrClosed", err)
	}
	if _, err := c.WaitAsyncEvent(context.Background()); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("WaitAsyncEvent after Close: %v, want ErrClosed", err)
	}
}
