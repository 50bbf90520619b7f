package mlx5

import (
	"errors"
	"github.com/goverbs/goverbs/internal/cqseam"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/mlx5model"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// Lock-free PollRings racing everything that retires a ring: run these
// under -race (make model does). The ring memory is outside the Go heap,
// which the race detector does not watch; what it checks is the CQ's own
// state, which PollRing reads with no lock.

// deviceWrite writes CQE number pi into ring (n CQEs of size bytes) as
// the HCA does, concurrently with the consumer: every byte but the last
// word, then the last word (op_own, with the owner bit of the pass) in
// one atomic store, so that no reader sees a CQE it owns half-written.
func deviceWrite(ring []byte, n, size, pi uint32, f cqeFields) {
	var e [128]byte
	writeCQE(e[:size], 1, size, 0, f)
	e[size-1] = e[size-1]&^cqeOwnerMask | uint8(pi/n&1)
	slot := ring[(pi&(n-1))*size:][:size]
	copy(slot[:size-4], e[:size-4])
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&slot[size-4])), *(*uint32)(unsafe.Pointer(&e[size-4])))
}

// TestPollRingRacesRetire: four goroutines PollRing a CQ in a loop, with
// batches of 1 to 7, while the test plays the device writing completions
// (outside the lock, into the slots the doorbell record says are free)
// and resizing the CQ now and then (under the lock, as cq.CQ.Resize:
// the device's resize CQE, then Resize's own moveTo, which retires the
// old ring), and at last releases it (as Destroy does) and fails the
// RingLock (as cq.CQ.Close does). Every completion comes out once, in
// order for each poller, and nothing faults.
func TestPollRingRacesRetire(t *testing.T) {
	const total = 50000
	c, _ := testCtx(t)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	for i := range qp.sq.wrid {
		qp.sq.wrid[i], qp.sq.wqeHead[i] = uint64(i), uint32(i)
	}
	q := testCQ(t, c, 8, 64)
	var l cqseam.RingLock
	closed := errors.New("closed")
	got := make([][]uint32, 4)
	var wg sync.WaitGroup
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wcs := make([]cq.WC, 1+2*g)
			for {
				n, err := q.PollRing(wcs, &l)
				if err != nil {
					if err != closed {
						t.Errorf("poller %d: %v", g, err)
					}
					return
				}
				if n == 0 {
					runtime.Gosched() // let the device in: the test has 2 cores
				}
				for _, w := range wcs[:n] {
					if w.Status != cq.Success || w.Opcode != cq.OpRDMARead {
						t.Errorf("poller %d: completion %+v", g, w)
					}
					got[g] = append(got[g], w.ByteLen)
				}
			}
		}()
	}
	// The device: the ring it writes, and the sequence number each
	// completion carries in its byte count.
	buf, n := q.buf, q.ncqe
	ci := func() uint32 { // what the doorbell record says
		w := atomic.LoadUint32((*uint32)(unsafe.Add(q.db, dbrecSetCI)))
		return beOrder.Uint32(unsafe.Slice((*byte)(unsafe.Pointer(&w)), 4))
	}
	sizes := []uint32{32, 4, 64, 16, 8, 128}
	pi, seq, resizes := uint32(0), uint32(0), 0
	for seq < total {
		if pi-ci() == n { // full: wait for the pollers
			runtime.Gosched()
			continue
		}
		for pi-ci() < n && seq < total {
			deviceWrite(buf, n, 64, pi, cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_RDMA_READ,
				qpn: 0x1234, uidx: testUIDX, counter: uint16(pi), byteCnt: seq})
			pi++
			seq++
		}
		if seq < uint32(resizes+1)*total/64 {
			continue
		}
		// Resize, once there is room for the resize CQE here and for what
		// is held in the new ring (the pollers make it).
		next := sizes[resizes%len(sizes)]
		for pi-ci() >= min(n, next) {
			runtime.Gosched()
		}
		l.Lock()
		deviceWrite(buf, n, 64, pi, cqeFields{opcode: uapi.MLX5_CQE_RESIZE_CQ})
		pi++
		fresh, err := newRing(next, 64)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.moveTo(fresh); err != nil {
			t.Fatal(err)
		}
		buf, n = fresh.mem, next
		resizes++
		l.Unlock()
	}
	for ci() != pi&0xffffff {
		runtime.Gosched() // the pollers drain it
	}
	l.Lock()
	q.Release()
	l.Fail(closed)
	l.Unlock()
	wg.Wait()
	var all []uint32
	for g, s := range got {
		if !slices.IsSorted(s) {
			t.Errorf("poller %d took completions out of order", g)
		}
		all = append(all, s...)
	}
	slices.Sort(all)
	for i, v := range all {
		if v != uint32(i) {
			t.Fatalf("completion %d of %d: sequence number %d (each must come once)", i, len(all), v)
		}
	}
	if len(all) != total {
		t.Fatalf("%d completions polled, want %d", len(all), total)
	}
	t.Logf("%d completions through %d resizes; per poller %d %d %d %d", total, resizes, len(got[0]), len(got[1]), len(got[2]), len(got[3]))
}

// TestPollRingRacesModel: the same race through the kernel's side, on
// the device model: CreateCQ, then Resize after Resize (the model writes
// the resize CQE and moves on to the new ring) and Destroy, each under
// the lock as package cq runs them, while four goroutines PollRing. The
// CQ stays empty, so every PollRing returns 0 until the RingLock fails,
// whichever ring it looked at; the model sees nothing wrong.
func TestPollRingRacesModel(t *testing.T) {
	d, conn, fd := modelConn(t)
	pc, kc, err := driver{}.Open(conn, fd)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAsync(kc)
	defer pc.Close()
	for round := range 5 {
		k, err := pc.CreateCQ(provider.CQReq{CQReq: kverbs.CQReq{CQE: 16, Channel: -1}})
		if err != nil {
			t.Fatal(err)
		}
		q := k.(*completionQueue)
		var l cqseam.RingLock
		closed := errors.New("closed")
		var wg sync.WaitGroup
		var polls atomic.Int64
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wcs := make([]cq.WC, 4)
				for {
					n, err := q.PollRing(wcs, &l)
					if err != nil {
						if err != closed {
							t.Errorf("round %d, poller %d: %v", round, g, err)
						}
						return
					}
					if n != 0 {
						t.Errorf("round %d, poller %d: %d completions from an empty CQ: %+v", round, g, n, wcs[:n])
						return
					}
					polls.Add(1)
					runtime.Gosched()
				}
			}()
		}
		for i, size := range []int{100, 8, 1000, 30, 4, 500, 64, 2} {
			for p := polls.Load(); polls.Load() < p+4; { // the pollers are at it
				runtime.Gosched()
			}
			l.Lock()
			if got, err := q.Resize(size); err != nil || got < size {
				t.Errorf("round %d, resize %d to %d: %d, %v", round, i, size, got, err)
			}
			l.Unlock()
		}
		l.Lock()
		if _, err := q.Destroy(); err != nil {
			t.Error(err)
		}
		l.Fail(closed)
		l.Unlock()
		wg.Wait()
	}
	if err := d.Err(); err != nil {
		t.Error(err)
	}
}

// TestPollRingRacesResize: PollRings spin on an empty CQ (one goroutine
// a spare core) while the test resizes it 10000 times, as fast as
// it can: each resize retires the ring a spinning PollRing may be
// reading at that moment. Unmapping a ring at once would fault here.
func TestPollRingRacesResize(t *testing.T) {
	c, _ := testCtx(t)
	q := testCQ(t, c, 8, 64)
	var l cqseam.RingLock
	closed := errors.New("closed")
	var wg sync.WaitGroup
	var polls atomic.Int64
	for range max(1, runtime.GOMAXPROCS(0)-1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wcs := make([]cq.WC, 4)
			for {
				n, err := q.PollRing(wcs, &l)
				if err != nil {
					if err != closed {
						t.Error(err)
					}
					return
				}
				if n != 0 {
					t.Errorf("%d completions from an empty CQ", n)
					return
				}
				polls.Add(1)
			}
		}()
	}
	for polls.Load() == 0 {
		runtime.Gosched()
	}
	pi := uint32(0)
	for i := range 10000 {
		next := uint32(8) << (i % 3)
		l.Lock()
		deviceWrite(q.buf, q.ncqe, 64, pi, cqeFields{opcode: uapi.MLX5_CQE_RESIZE_CQ})
		pi++
		fresh, err := newRing(next, 64)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.moveTo(fresh); err != nil {
			t.Fatal(err)
		}
		l.Unlock()
	}
	l.Lock()
	q.Release()
	l.Fail(closed)
	l.Unlock()
	wg.Wait()
	t.Logf("%d empty PollRings during 10000 resizes", polls.Load())
}

// modelConn opens a context on a fresh device model and returns the
// model, the transport to the context and its fd, all closed (the model
// checked) when the test ends.
func modelConn(t *testing.T) (*mlx5model.Device, *transport.Conn, int) {
	t.Helper()
	d := mlx5model.New(mlx5model.Options{})
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	mc, err := d.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(mc.FD()) })
	t.Cleanup(func() { mc.Close() })
	return d, transport.NewKernelConn(mc.FD(), uapi.RDMA_DRIVER_MLX5, mc), mc.FD()
}
