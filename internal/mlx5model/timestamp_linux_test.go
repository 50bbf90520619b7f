package mlx5model_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// Completion timestamps (cq.Config.Timestamps) through the mlx5 provider
// on the model, whose HCA stamps every CQE but error ones.

// stale is what each slot holds before a Poll: a CQ must overwrite it.
const stale = 0x5a5a5a5a

// pollStamped polls n completions from q into slots that hold a stale
// Timestamp, so that a Poll that leaves the field alone is caught.
func pollStamped(t *testing.T, q *cq.CQ, n int) []cq.WC {
	t.Helper()
	out := make([]cq.WC, 0, n)
	buf := make([]cq.WC, 4)
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		for i := range buf {
			buf[i] = cq.WC{Timestamp: stale}
		}
		k, err := q.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("got %d of %d completions in 10 s", len(out), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return out
}

// stampedPair connects an RC pair: a's completions go to a CQ with
// timestamps of sendClock, b's to one of recvClock.
func stampedPair(t *testing.T, f *pfix, sendClock, recvClock cq.Clock) (a, b *uverbs.QP, s, r *cq.CQ) {
	t.Helper()
	var err error
	if s, err = f.ctx.NewCQ(cq.Config{Size: 64, Timestamps: sendClock}); err != nil {
		t.Fatal(err)
	}
	if r, err = f.ctx.NewCQ(cq.Config{Size: 64, Timestamps: recvClock}); err != nil {
		t.Fatal(err)
	}
	a, b = f.qp(t, uverbs.RC, s, s), f.qp(t, uverbs.RC, r, r)
	t.Cleanup(func() { a.Close(); b.Close(); s.Close(); r.Close() }) // before psetup's: the QPs first
	rdmatest.ConnectRC(t, a, b)
	return a, b, s, r
}

// exchange makes rounds of 4 sends from a to b, a millisecond apart, and
// returns the send and receive completions.
func exchange(t *testing.T, f *pfix, a, b *uverbs.QP, s, r *cq.CQ, rounds int) (sends, recvs []cq.WC) {
	t.Helper()
	for round := range rounds {
		for i := range 4 {
			recv(t, b, uint64(round*4+i), rdmatest.SGE(t, f.mr, 4096, 64))
			post(t, a, uverbs.SendWR{WRID: uint64(round*4 + i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 16)}})
		}
		sends = append(sends, pollStamped(t, s, 4)...)
		recvs = append(recvs, pollStamped(t, r, 4)...)
		time.Sleep(time.Millisecond)
	}
	return sends, recvs
}

// nonDecreasing checks that wcs succeeded and their timestamps are
// nonzero and never go back, in completion order.
func nonDecreasing(t *testing.T, what string, wcs []cq.WC) {
	t.Helper()
	for i, w := range wcs {
		switch {
		case w.Status != cq.Success:
			t.Fatalf("%s %d: %+v", what, i, w)
		case w.Timestamp == 0 || w.Timestamp == stale:
			t.Errorf("%s %d: timestamp %#x", what, i, w.Timestamp)
		case i > 0 && w.Timestamp < wcs[i-1].Timestamp:
			t.Errorf("%s %d: timestamp %d goes back from %d", what, i, w.Timestamp, wcs[i-1].Timestamp)
		}
	}
}

// A CQ with device-clock timestamps gets the device's ticks, nonzero and
// never going back in completion order, at the rate DeviceAttr reports;
// a CQ without gets 0 in every completion, as do error completions of a
// CQ with; wall-clock timestamps of a free-running clock are refused.
func TestProviderTimestamps(t *testing.T) {
	f := psetup(t)
	attr, err := f.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if attr.CompletionTimestampMask == 0 || attr.HCACoreClock == 0 {
		t.Fatalf("the model reports completion timestamp mask %#x, clock %d kHz", attr.CompletionTimestampMask, attr.HCACoreClock)
	}
	a, b, s, r := stampedPair(t, f, cq.DeviceClock, cq.NoTimestamps)
	start := time.Now()
	sends, recvs := exchange(t, f, a, b, s, r, 4)
	took := time.Since(start)
	nonDecreasing(t, "send completion", sends)
	// Ticks at HCACoreClock kHz: the 16 sends took no longer than the test did.
	if ticks, most := sends[len(sends)-1].Timestamp-sends[0].Timestamp, uint64(took.Nanoseconds())*attr.HCACoreClock/1e6; ticks > most {
		t.Errorf("the sends took %d ticks of the device's clock, more than %v at %d kHz (%d)", ticks, took, attr.HCACoreClock, most)
	}
	if sends[4].Timestamp == sends[3].Timestamp {
		t.Errorf("a millisecond apart, two completions carry one timestamp %d", sends[3].Timestamp)
	}
	for i, w := range recvs {
		if w.Status != cq.Success || w.Timestamp != 0 {
			t.Errorf("receive %d on a CQ without timestamps: status %v, timestamp %#x", i, w.Status, w.Timestamp)
		}
	}

	// Error completions carry none: the error CQE has its syndromes where
	// the timestamp would be.
	rdmatest.Model(t).InjectError(a.QPN(), uapi.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR)
	for i := range 2 {
		post(t, a, uverbs.SendWR{WRID: uint64(100 + i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{rdmatest.SGE(t, f.mr, 0, 16)}})
	}
	for i, w := range pollStamped(t, s, 2) {
		if w.Status == cq.Success || w.Timestamp != 0 {
			t.Errorf("error completion %d: status %v, timestamp %#x, want 0", i, w.Status, w.Timestamp)
		}
	}

	// Wall-clock time needs the clock in real-time mode; the model's is
	// free-running.
	q, err := f.ctx.NewCQ(cq.Config{Size: 4, Timestamps: cq.WallClock})
	if err == nil {
		q.Close()
		t.Fatal("a CQ with wall-clock timestamps of a free-running clock was created")
	}
	var op *uverbs.OpError
	if !errors.Is(err, cq.ErrNotSupported) || !errors.As(err, &op) || op.Op != "create cq" || op.Device != "mlx5_0" ||
		!strings.Contains(err.Error(), "real-time") {
		t.Errorf("wall-clock timestamps of a free-running clock: %v, want a create cq mlx5_0 error wrapping ErrNotSupported", err)
	}
	t.Logf("refused: %v", err)
	if q, err := f.ctx.NewCQ(cq.Config{Size: 4, Timestamps: cq.WallClock + 1}); !errors.Is(err, syscall.EINVAL) {
		if err == nil {
			q.Close()
		}
		t.Errorf("timestamps %v: %v, want EINVAL", cq.WallClock+1, err)
	}
}

// On a device whose clock runs in real-time mode, a CQ with wall-clock
// timestamps gets nanoseconds since the Unix epoch, within the time the
// test saw pass, never going back; a CQ of the same device with device
// timestamps still gets the free-running clock's ticks.
func TestProviderWallClockTimestamps(t *testing.T) {
	t.Setenv(rdmatest.EnvModelOptions, "realtime")
	f := psetup(t)
	a, b, s, r := stampedPair(t, f, cq.WallClock, cq.DeviceClock)
	before := time.Now()
	sends, recvs := exchange(t, f, a, b, s, r, 3)
	after := time.Now()
	nonDecreasing(t, "send completion", sends)
	nonDecreasing(t, "receive completion", recvs)
	lo, hi := uint64(before.UnixNano()), uint64(after.UnixNano())
	for i, w := range sends {
		if w.Timestamp < lo || w.Timestamp > hi {
			t.Errorf("send %d: wall-clock timestamp %v, outside [%v, %v]", i,
				time.Unix(0, int64(w.Timestamp)).UTC(), before.UTC(), after.UTC())
		}
	}
	// The free-running clock started with the device, moments ago.
	if last := recvs[len(recvs)-1].Timestamp; last >= lo || last > uint64(time.Hour) {
		t.Errorf("device-clock timestamp %d on a real-time device: not the free-running clock's ticks", last)
	}
}
