package mlx5model_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/mlx5model"
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
//   - the data path fails with uverbs.ErrDeviceFatal (EIO): the Context
//     reads the DEVICE_FATAL as it comes and fails its CQs and QPs, so
//     PostSend, PostRecv and ReqNotify ring no doorbell into the zapped
//     pages, and Poll, once the rings are empty, fails
//     (TestRemoveDeviceEndsDataPath: without reading async events);
//   - every Close succeeds (the kernel answers destroys after the removal),
//     in any order, even a CQ before the QP that uses it and the PD first;
//     calls after Close fail with ErrClosed;
//   - nothing panics or hangs, no fd is left open, the model sees no fault.
func TestRemoveDevice(t *testing.T) {
	dev, c, pd, buf, mr, must := removeFixture(t)
	defer buf.Close()
	mem := buf.Bytes()
	var err error
	waitCh, err := c.NewCompChannel() // the parked waiter's
	must(err)
	queuedCh, err := c.NewCompChannel() // holds an unread event at the removal
	must(err)
	idle, err := c.NewCQ(cq.Config{Size: 4, Channel: waitCh})
	must(err)
	scq, err := c.NewCQ(cq.Config{Size: 64, Channel: queuedCh})
	must(err)
	rcq, err := c.NewCQ(cq.Config{Size: 64})
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
		if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 4096, 64)}}}); err != nil {
			return err
		}
		_, err := a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 64)}}})
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
		{"NewCQ", "create cq", func() error { _, err := c.NewCQ(cq.Config{Size: 4}); return err }},
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

	// The data path fails with ErrDeviceFatal: the Context's async watcher
	// read the DEVICE_FATAL, and failed the CQs and QPs before the waiter
	// above got it. No post writes a ring or rings a doorbell, no arm
	// either, and Poll, the rings empty, fails. Nothing reaches the HCA.
	isFatal := func(what string, err error, op string) {
		t.Helper()
		isEIO(what, err, op)
		if !errors.Is(err, uverbs.ErrDeviceFatal) {
			t.Errorf("%s: %v; want it to wrap uverbs.ErrDeviceFatal", what, err)
		}
	}
	k, err := b.PostRecv([]uverbs.RecvWR{{WRID: 3, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 4096, 64)}}})
	if k != 0 {
		t.Errorf("PostRecv after the removal posted %d", k)
	}
	isFatal("PostRecv after the removal", err, "post recv")
	k, err = a.PostSend([]uverbs.SendWR{{WRID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 64)}}})
	if k != 0 {
		t.Errorf("PostSend after the removal posted %d", k)
	}
	isFatal("PostSend after the removal", err, "post send")
	isFatal("ReqNotify after the removal", scq.ReqNotify(cq.NextCompletion), "req notify cq")
	wcs := make([]cq.WC, 4)
	for _, q := range []*cq.CQ{scq, rcq, idle} {
		k, err := q.Poll(wcs)
		if k != 0 {
			t.Errorf("Poll after the removal found %d completions: %+v", k, wcs[:k])
		}
		isFatal("Poll after the removal", err, "poll cq")
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

// TestRemoveDeviceEndsDataPath removes the device under a program that
// never reads async events and only polls and posts (issue #36): before,
// it could not know, since mlx5 posts, arms and polls in memory, and a
// poller spun on an empty CQ forever. The Context's async watcher reads
// the DEVICE_FATAL the removal queues, and:
//
//   - Poll hands out what each CQ's ring still holds, in order, then every
//     Poll fails with an error wrapping uverbs.ErrDeviceFatal (EIO) that
//     names the verb and the device;
//   - ReqNotify fails with it at once;
//   - PostSend, PostSendInline and PostRecv fail with it, post nothing,
//     and ring no doorbell;
//   - the event still waits for TryAsyncEvent, and Close still wins:
//     calls after it return ErrClosed.
func TestRemoveDeviceEndsDataPath(t *testing.T) {
	dev, c, pd, buf, mr, must := removeFixture(t)
	defer buf.Close()
	var err error
	scq, err := c.NewCQ(cq.Config{Size: 64})
	must(err)
	rcq, err := c.NewCQ(cq.Config{Size: 64})
	must(err)
	newQP := func(q *cq.CQ) *uverbs.QP {
		qp, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: q, RecvCQ: q,
			Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
		must(err)
		return qp
	}
	a, b := newQP(scq), newQP(rcq)
	rdmatest.ConnectRC(t, a, b)

	// Three messages, completed and left in the CQs, unpolled.
	const n = 3
	var recvs []uverbs.RecvWR
	var sends []uverbs.SendWR
	for i := range n {
		recvs = append(recvs, uverbs.RecvWR{WRID: 100 + uint64(i), SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 4096+64*i, 64)}})
		sends = append(sends, uverbs.SendWR{WRID: 200 + uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 64*i, 64)}})
	}
	cqes := dev.Stats().CQEs
	_, err = b.PostRecv(recvs)
	must(err)
	_, err = a.PostSend(sends)
	must(err)
	for deadline := time.Now().Add(5 * time.Second); dev.Stats().CQEs < cqes+2*n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d completions written 5 s after the posts", dev.Stats().CQEs-cqes, 2*n)
		}
	}

	if err := dev.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	removed := dev.Stats()

	isFatal := func(what string, err error, op string) {
		t.Helper()
		var oe *uverbs.OpError
		if !errors.As(err, &oe) || oe.Op != op || oe.Device != rdmatest.DeviceName() ||
			!errors.Is(err, uverbs.ErrDeviceFatal) || !errors.Is(err, unix.EIO) {
			t.Errorf("%s: %v; want an *OpError for %q on %s wrapping uverbs.ErrDeviceFatal and EIO",
				what, err, op, rdmatest.DeviceName())
		}
	}
	// A poller: what the ring holds, then the error, never a wait
	// forever. Two slots for three completions: the drain takes two Polls.
	wcs := make([]cq.WC, 2)
	for _, x := range []struct {
		name  string
		q     *cq.CQ
		first uint64
	}{{"send CQ", scq, 200}, {"receive CQ", rcq, 100}} {
		var got []uint64
		var perr error
		for deadline := time.Now().Add(5 * time.Second); ; {
			k, err := x.q.Poll(wcs)
			for _, w := range wcs[:k] {
				if w.Status != cq.Success {
					t.Errorf("%s: completion %d: %v", x.name, w.WRID, w.Status)
				}
				got = append(got, w.WRID)
			}
			if err != nil {
				perr = err
				break
			}
			if k == 0 {
				if time.Now().After(deadline) {
					t.Errorf("%s: Poll still finds nothing and no error 5 s after the removal", x.name)
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
		if diff := cmp.Diff([]uint64{x.first, x.first + 1, x.first + 2}, got); diff != "" {
			t.Errorf("%s: completions handed out after the removal (-want +got):\n%s", x.name, diff)
		}
		isFatal(x.name+": Poll once the ring is drained", perr, "poll cq")
		k, err := x.q.Poll(wcs)
		if k != 0 {
			t.Errorf("%s: a later Poll found %d completions", x.name, k)
		}
		isFatal(x.name+": a later Poll", err, "poll cq")
	}
	isFatal("ReqNotify", scq.ReqNotify(cq.NextCompletion), "req notify cq")
	isFatal("ReqNotify (solicited)", rcq.ReqNotify(cq.NextSolicited), "req notify cq")
	k, err := b.PostRecv(recvs[:1])
	if k != 0 {
		t.Errorf("PostRecv after the removal posted %d", k)
	}
	isFatal("PostRecv", err, "post recv")
	k, err = a.PostSend(sends[:1])
	if k != 0 {
		t.Errorf("PostSend after the removal posted %d", k)
	}
	isFatal("PostSend", err, "post send")
	isFatal("PostSendInline", a.PostSendInline(uverbs.SendWR{WRID: 9, Opcode: uverbs.WRSend}, []byte("x")), "post send")
	if s := dev.Stats(); s.SendDoorbells != removed.SendDoorbells || s.ArmDoorbells != removed.ArmDoorbells ||
		s.WQEs != removed.WQEs || s.Faults != 0 {
		t.Errorf("doorbells rung after the removal: %+v, then %+v", removed, s)
	}

	// The event is still queued for a program that asks.
	if ev, ok, err := c.TryAsyncEvent(); err != nil || !ok || ev.Type != uverbs.EventDeviceFatal {
		t.Errorf("TryAsyncEvent after the removal: %v, %v, %v; want DEVICE_FATAL", ev, ok, err)
	}

	for _, x := range []struct {
		name  string
		close func() error
	}{{"QP a", a.Close}, {"QP b", b.Close}, {"send CQ", scq.Close}, {"receive CQ", rcq.Close}, {"MR", mr.Close}, {"PD", pd.Close}} {
		if err := x.close(); err != nil {
			t.Errorf("close %s after the removal: %v", x.name, err)
		}
	}
	if _, err := a.PostSend(sends[:1]); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostSend after Close: %v, want ErrClosed", err)
	}
	if _, err := b.PostRecv(recvs[:1]); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("PostRecv after Close: %v, want ErrClosed", err)
	}
	if _, err := scq.Poll(wcs); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("Poll after Close: %v, want ErrClosed", err)
	}
}

// TestRemoveDeviceRacesPostsAndClose removes the device while goroutines
// post receives in a loop and another closes QPs. The DEVICE_FATAL the
// Context reads stops every QP's posts under the QP's post locks, which
// QP.Close holds while it takes the async events' table (untrackAsync):
// nothing may deadlock, and every post loop ends, with ErrDeviceFatal or
// (its QP closed) ErrClosed.
func TestRemoveDeviceRacesPostsAndClose(t *testing.T) {
	testutil.CheckFDLeak(t) // first: checked after every other cleanup
	t.Setenv(rdmatest.EnvDevice, rdmatest.ModelDevice)
	for round := range 20 {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			dev := rdmatest.Model(t)
			c := rdmatest.Open(t)
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			buf, err := uverbs.AllocBuffer(1 << 12)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			mr, err := pd.RegMR(buf.Bytes(), rdmatest.AllAccess)
			if err != nil {
				t.Fatal(err)
			}
			q, err := c.NewCQ(cq.Config{Size: 256})
			if err != nil {
				t.Fatal(err)
			}
			qps := make([]*uverbs.QP, 16)
			for i := range qps {
				if qps[i], err = pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: q, RecvCQ: q,
					Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < len(qps); i += 2 {
				rdmatest.ConnectRC(t, qps[i], qps[i+1])
			}
			sgl := []uverbs.SGE{rdmatest.SGE(t, mr, 0, 64)}
			ended := make(chan error, len(qps))
			for _, qp := range qps {
				go func() {
					wr := []uverbs.RecvWR{{WRID: 1, SGL: sgl}}
					for {
						_, err := qp.PostRecv(wr)
						switch {
						case err == nil, errors.Is(err, unix.ENOMEM): // the queue full: go on
							runtime.Gosched()
							continue
						case errors.Is(err, uverbs.ErrDeviceFatal), errors.Is(err, uverbs.ErrClosed):
							err = nil
						}
						ended <- err
						return
					}
				}()
			}
			closed := make(chan error, 1)
			go func() { // half the QPs, each on a goroutine of its own
				errs := make(chan error, len(qps)/2)
				for _, qp := range qps[:len(qps)/2] {
					go func() { errs <- qp.Close() }()
				}
				var all []error
				for range len(qps) / 2 {
					all = append(all, <-errs)
				}
				closed <- errors.Join(all...)
			}()
			if err := dev.Remove(); err != nil {
				t.Errorf("Remove: %v", err)
			}
			timeout := time.After(10 * time.Second)
			for range qps {
				select {
				case err := <-ended:
					if err != nil {
						t.Errorf("a post loop ended with %v; want ErrDeviceFatal or ErrClosed", err)
					}
				case <-timeout:
					deadlocked("post loops still running 10 s after the removal (their posts never fail, or a deadlock)")
				}
			}
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("closing QPs during the removal: %v", err)
				}
			case <-timeout:
				deadlocked("QP.Close still running 10 s after the removal (a deadlock)")
			}
			for _, qp := range qps[len(qps)/2:] {
				if err := qp.Close(); err != nil {
					t.Errorf("close a QP after the removal: %v", err)
				}
			}
			for _, cl := range []func() error{q.Close, mr.Close, pd.Close} {
				if err := cl(); err != nil {
					t.Errorf("close after the removal: %v", err)
				}
			}
		})
	}
}

// deadlocked ends the test binary at once with every goroutine's stack:
// the test cannot fail and go on, since after a deadlock its cleanups
// (closing the Context) would wait for the same locks until go test's
// own timeout.
func deadlocked(what string) {
	stacks := make([]byte, 1<<20)
	stacks = stacks[:runtime.Stack(stacks, true)]
	go panic(fmt.Sprintf("%s\n\n%s", what, stacks)) // not the test's goroutine: no cleanups run
	select {}
}

// removeFixture is what the removal tests start from: an fd-leak check
// (first, so it runs after every other cleanup), the test's model device,
// a context on it, a PD, and a 64 KiB buffer registered with every right;
// must fails the test on an error.
func removeFixture(t *testing.T) (dev *mlx5model.Device, c *uverbs.Context, pd *uverbs.PD, buf *uverbs.Buffer, mr *uverbs.MR, must func(error)) {
	t.Helper()
	testutil.CheckFDLeak(t)
	t.Setenv(rdmatest.EnvDevice, rdmatest.ModelDevice)
	dev = rdmatest.Model(t)
	c = rdmatest.Open(t)
	must = func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pd, err := c.AllocPD()
	must(err)
	buf, err = uverbs.AllocBuffer(1 << 16)
	must(err)
	mr, err = pd.RegMR(buf.Bytes(), rdmatest.AllAccess)
	if err != nil {
		buf.Close()
		t.Fatal(err)
	}
	return dev, c, pd, buf, mr, must
}
