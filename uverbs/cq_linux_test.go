package uverbs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

func TestCompChannelAndCQ(t *testing.T) {
	c := openRXE(t)
	testutil.CheckFDLeak(t)
	ch, err := c.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	// ibv_create_cq(3): "the CQ will have at least cqe entries".
	for _, cfg := range []cq.Config{
		{Size: 1},
		{Size: 10, Channel: ch},
		{Size: 256, Channel: ch, Vector: c.NumCompVectors() - 1, UserValue: 42},
		{Size: 32767}, // rxe's max_cqe
	} {
		q, err := c.NewCQ(cfg)
		if err != nil {
			t.Fatalf("NewCQ(%+v): %v", cfg, err)
		}
		if q.Size() < cfg.Size {
			t.Errorf("NewCQ(%+v).Size() = %d", cfg, q.Size())
		}
		t.Logf("asked %d, got %d", cfg.Size, q.Size())
		if q.UserValue() != cfg.UserValue || q.Channel() != cfg.Channel || q.Vector() != cfg.Vector {
			t.Errorf("configuration not kept: user %d channel %p vector %d", q.UserValue(), q.Channel(), q.Vector())
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		if err := q.Close(); !errors.Is(err, cq.ErrClosed) {
			t.Errorf("second CQ Close: %v", err)
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatalf("closing the idle channel: %v", err)
	}
	if err := ch.Close(); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("second channel Close: %v", err)
	}
	if _, err := c.NewCQ(cq.Config{Size: 4, Channel: ch}); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("NewCQ on a closed channel: %v", err)
	}
}

func TestNewCQBadInput(t *testing.T) {
	c := openRXE(t)
	testutil.CheckFDLeak(t)
	for _, tt := range []struct {
		name string
		cfg  cq.Config
	}{
		{"cqe 0", cq.Config{}},
		{"cqe negative", cq.Config{Size: -5}},
		{"cqe above max_cqe", cq.Config{Size: 32768}},
		{"cqe huge", cq.Config{Size: 1<<31 - 1}},
		{"vector negative", cq.Config{Size: 4, Vector: -1}},
		{"vector = num_comp_vectors", cq.Config{Size: 4, Vector: c.NumCompVectors()}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, err := c.NewCQ(tt.cfg)
			if err == nil {
				q.Close()
				t.Fatal("accepted")
			}
			var op *uverbs.OpError
			if !errors.Is(err, unix.EINVAL) || !errors.As(err, &op) || op.Op != "create cq" {
				t.Errorf("err = %v, want a create cq *OpError wrapping EINVAL", err)
			}
			t.Log(err)
		})
	}
}

func TestCQUseAfterContextClose(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	c, err := uverbs.Open("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.NewCQ(cq.Config{Size: 8})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := q.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("closing a CQ after its context: %v", err)
	}
	// The CQ is gone with its context: its ring is unmapped, and polling
	// it is an error, not a crash.
	if _, err := q.Poll(make([]cq.WC, 4)); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("Poll after the context closed: %v", err)
	}
	if err := q.Close(); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.NewCQ(cq.Config{Size: 8}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("NewCQ after Close: %v", err)
	}
	if _, err := c.NewCompChannel(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("NewCompChannel after Close: %v", err)
	}
}

// rxe has no completion timestamps: its completion timestamp mask is 0,
// and a CQ asking for them (either clock) is refused before the kernel
// is asked, with an error wrapping ErrNotSupported (and EOPNOTSUPP, the
// kernel's answer) that names the verb and the device. A CQ without
// them reports Timestamp 0, whatever the slot held.
func TestCQTimestampsRefused(t *testing.T) {
	e := newQPEnv(t)
	attr, err := e.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if attr.CompletionTimestampMask != 0 {
		t.Errorf("rxe reports completion timestamp mask %#x, want 0", attr.CompletionTimestampMask)
	}
	for _, clock := range []cq.Clock{cq.DeviceClock, cq.WallClock} {
		q, err := e.ctx.NewCQ(cq.Config{Size: 4, Timestamps: clock})
		if err == nil {
			q.Close()
			t.Fatalf("a CQ with %v timestamps was created on rxe", clock)
		}
		var op *uverbs.OpError
		if !errors.Is(err, uverbs.ErrNotSupported) || !errors.Is(err, unix.EOPNOTSUPP) || !errors.As(err, &op) ||
			op.Op != "create cq" || op.Device != "rxe0" || !strings.Contains(err.Error(), "rxe has no completion timestamps") {
			t.Errorf("%v timestamps: %v, want a create cq rxe0 error wrapping ErrNotSupported and EOPNOTSUPP", clock, err)
		}
		t.Logf("%v: %v", clock, err)
	}

	a, b := e.qp(t, uverbs.RC), e.qp(t, uverbs.RC)
	rdmatest.ConnectRC(t, a, b)
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := e.pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	// Two completions: one polled into one slot, rxe's path of its own
	// for one, the other into two.
	for i := range 2 {
		if _, err := a.PostSend([]uverbs.SendWR{{WRID: uint64(5 + i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 8)}, RemoteAddr: mr.Addr() + 64, RKey: mr.RKey()}}); err != nil {
			t.Fatal(err)
		}
		wcs := []cq.WC{{Timestamp: 0x5a5a}, {Timestamp: 0x5a5a}}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			n, err := e.cq.Poll(wcs[:1+i])
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no completion in 10 s")
			}
		}
		if w := wcs[0]; w.WRID != uint64(5+i) || w.Status != cq.Success || w.Timestamp != 0 || wcs[1].Timestamp != 0x5a5a {
			t.Errorf("completion %+v, want WRID %d, success, timestamp 0 (next slot %+v)", w, 5+i, wcs[1])
		}
	}
}

// TestCQTimestamps runs on the test device (rxe0, the mlx5 model, or a
// ConnectX through make hwtest): a device that reports a completion
// timestamp mask stamps every completion of a CQ created with DeviceClock,
// in its clock's ticks and never going back in completion order, and
// leaves a CQ created without them at 0; a device that reports none
// refuses the CQ with ErrNotSupported. WallClock either works, in
// nanoseconds around the test's own clock, or is ErrNotSupported.
func TestCQTimestamps(t *testing.T) {
	e := newModelQPEnv(t)
	attr, err := e.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if attr.CompletionTimestampMask == 0 {
		q, err := e.ctx.NewCQ(cq.Config{Size: 4, Timestamps: cq.DeviceClock})
		if err == nil {
			q.Close()
			t.Fatal("a device with no completion timestamp mask made a CQ with timestamps")
		}
		if !errors.Is(err, uverbs.ErrNotSupported) {
			t.Errorf("device clock timestamps on a device without them: %v, want ErrNotSupported", err)
		}
		return
	}
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := e.pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	// stamped writes n RDMA WRITEs between two QPs on a CQ with clock
	// (nil: the env's CQ, made without timestamps) and returns their
	// completions, polled into slots holding a stale timestamp.
	stamped := func(clock cq.Clock, n int) []cq.WC {
		t.Helper()
		c := e.cq
		if clock != cq.NoTimestamps {
			if c, err = e.ctx.NewCQ(cq.Config{Size: 16, Timestamps: clock}); err != nil {
				t.Fatal(err)
			}
			defer c.Close()
		}
		var qps [2]*uverbs.QP
		for i := range qps {
			qp, err := e.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: c, RecvCQ: c,
				Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				t.Fatal(err)
			}
			defer qp.Close()
			qps[i] = qp
		}
		rdmatest.ConnectRC(t, qps[0], qps[1])
		var out []cq.WC
		wcs := make([]cq.WC, 4)
		for i := range n {
			if _, err := qps[0].PostSend([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 8)}, RemoteAddr: mr.Addr() + 64, RKey: mr.RKey()}}); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(10 * time.Second); len(out) <= i; time.Sleep(time.Millisecond) {
				for j := range wcs {
					wcs[j].Timestamp = 0x5a5a
				}
				k, err := c.Poll(wcs)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, wcs[:k]...)
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d completions in 10 s", len(out), n)
				}
			}
		}
		for _, w := range out {
			if w.Status != cq.Success {
				t.Fatalf("completion %+v: %v", w, w.Status)
			}
		}
		return out
	}

	ticks := stamped(cq.DeviceClock, 8)
	for i, w := range ticks {
		if w.Timestamp == 0 || w.Timestamp == 0x5a5a || w.Timestamp&^attr.CompletionTimestampMask != 0 {
			t.Errorf("completion %d: timestamp %#x (mask %#x)", i, w.Timestamp, attr.CompletionTimestampMask)
		}
		if i > 0 && w.Timestamp < ticks[i-1].Timestamp {
			t.Errorf("completion %d: timestamp %d before the previous one's %d", i, w.Timestamp, ticks[i-1].Timestamp)
		}
	}
	t.Logf("device clock %d kHz: %d completions over %d ticks", attr.HCACoreClock, len(ticks), ticks[len(ticks)-1].Timestamp-ticks[0].Timestamp)
	for i, w := range stamped(cq.NoTimestamps, 2) {
		if w.Timestamp != 0 {
			t.Errorf("completion %d of a CQ without timestamps: timestamp %#x, want 0", i, w.Timestamp)
		}
	}

	q, err := e.ctx.NewCQ(cq.Config{Size: 4, Timestamps: cq.WallClock})
	if err != nil {
		if !errors.Is(err, uverbs.ErrNotSupported) {
			t.Errorf("wall-clock timestamps: %v, want a CQ or ErrNotSupported", err)
		}
		t.Logf("wall clock: %v", err)
		return
	}
	q.Close()
	before := time.Now()
	wall := stamped(cq.WallClock, 2)
	after := time.Now()
	for i, w := range wall {
		// The device's clock is as good as whatever keeps it: allow a
		// second either way.
		if at := time.Unix(0, int64(w.Timestamp)); at.Before(before.Add(-time.Second)) || at.After(after.Add(time.Second)) {
			t.Errorf("wall-clock completion %d at %v, outside [%v, %v] by more than a second", i, at, before, after)
		}
	}
}
