package mlx5

import (
	"errors"
	"math/rand/v2"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uapi"
)

// The SRQ's WQE layout: the next segment of struct mlx5_wqe_srq_next_seg,
// data segments after it.
func TestSRQLayout(t *testing.T) {
	var n uapi.Mlx5WqeSRQNextSeg
	if srqNextSize != unsafe.Sizeof(n) || srqNextIndex != unsafe.Offsetof(n.NextWqeIndex) {
		t.Errorf("next segment: %d bytes, index at %d; the header says %d, %d",
			srqNextSize, srqNextIndex, unsafe.Sizeof(n), unsafe.Offsetof(n.NextWqeIndex))
	}
}

// testSRQ is an SRQ with no kernel, on a QP of the test context whose
// receive completions name it.
func testSRQ(t testing.TB, c *context, maxWR, maxSGE uint32) (*sharedRecvQueue, *queuePair) {
	t.Helper()
	s, err := c.newSRQ(maxWR, maxSGE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Release)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 1, MaxSendSGE: 1})
	qp.srq = s
	return s, qp
}

// The geometry follows mlx5_ib_create_srq: WQEs of a next segment and
// max_sge data segments, rounded up to a power of two of at least 32
// bytes; max_wr+1 of them, rounded up to a power of two; the device's
// limits refused with EINVAL.
func TestSRQSize(t *testing.T) {
	dev := uapi.Mlx5IBAllocUcontextResp{MaxRqDescSz: 512, MaxSRQRecvWR: 1 << 15}
	for _, c := range []struct {
		wr, sge             uint32
		cnt, stride, maxSGE uint32
	}{
		{1, 1, 2, 32, 1},
		{7, 1, 8, 32, 1},
		{8, 1, 16, 32, 1},
		{100, 2, 128, 64, 3},
		{1<<15 - 1, 31, 1 << 15, 512, 31},
	} {
		var s sharedRecvQueue
		if err := s.size(c.wr, c.sge, &dev); err != nil {
			t.Errorf("%d WRs of %d SGEs: %v", c.wr, c.sge, err)
			continue
		}
		if s.cnt != c.cnt || 1<<s.shift != c.stride || s.maxGS != c.maxSGE {
			t.Errorf("%d WRs of %d SGEs: %d WQEs of %d bytes, %d SGEs; want %d of %d, %d",
				c.wr, c.sge, s.cnt, 1<<s.shift, s.maxGS, c.cnt, c.stride, c.maxSGE)
		}
	}
	for _, c := range [][2]uint32{{0, 1}, {1, 0}, {1 << 15, 1}, {1 << 31, 1}, {1, 32}, {1, 1 << 20}} {
		var s sharedRecvQueue
		if err := s.size(c[0], c[1], &dev); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%d WRs of %d SGEs: %v, want EINVAL", c[0], c[1], err)
		}
	}
}

// Posting takes WQEs along the free list, writes their segments (the
// list ended by the invalid lkey when it is shorter than the WQE) and
// publishes the count in the doorbell record; the list's tail is never
// posted, so the SRQ is full one WQE early.
func TestSRQPostRecvWQE(t *testing.T) {
	c, _ := testCtx(t)
	s, _ := testSRQ(t, c, 3, 2) // 4 WQEs of 64 bytes: 3 SGEs
	if s.cnt != 4 || s.shift != 6 || s.maxGS != 3 || s.MaxWR() != 3 {
		t.Fatalf("geometry: %d WQEs of %d bytes, %d SGEs, MaxWR %d", s.cnt, 1<<s.shift, s.maxGS, s.MaxWR())
	}
	for i := uint32(0); i < 4; i++ {
		if n := beOrder.Uint16(s.wqe(i)[srqNextIndex:]); uint32(n) != (i+1)%4 {
			t.Errorf("WQE %d links to %d at creation", i, n)
		}
	}
	sgl := []provider.SGE{{Addr: 0x1000, Length: 16, LKey: 5}, {Addr: 0x2000, Length: 0, LKey: 6}, {Addr: 0x3000, Length: 32, LKey: 7}}
	if n, err := s.PostRecv([]provider.RecvWR{{WRID: 10, SGL: sgl}, {WRID: 11}}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	want := [][3]uint64{{16, 5, 0x1000}, {32, 7, 0x3000}, {0, uapi.MLX5_INVALID_LKEY, 0}}
	for k, w := range want {
		d := s.wqe(0)[srqNextSize+k*16:]
		if got := [3]uint64{uint64(beOrder.Uint32(d)), uint64(beOrder.Uint32(d[4:])), beOrder.Uint64(d[8:])}; got != w {
			t.Errorf("WQE 0, segment %d: %v, want %v", k, got, w)
		}
	}
	if d := s.wqe(1)[srqNextSize:]; beOrder.Uint32(d[4:]) != uapi.MLX5_INVALID_LKEY {
		t.Error("an empty receive is not terminated at once")
	}
	if db := dbWord(s.db, 0); db != 2 {
		t.Errorf("doorbell record %d, want 2", db)
	}
	if s.wrid[0] != 10 || s.wrid[1] != 11 || s.head != 2 {
		t.Errorf("wr_ids %v, head %d", s.wrid, s.head)
	}
	if n, err := s.PostRecv(make([]provider.RecvWR, 2)); n != 1 || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("posting 2 with 1 free: %d, %v", n, err)
	}
	if n, err := s.PostRecv([]provider.RecvWR{{SGL: make([]provider.SGE, 4)}}); n != 0 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("4 SGEs into WQEs of 3: %d, %v", n, err)
	}
	// WQE 1 completes first: it is linked after the tail (3), and the
	// post after it takes 3, then 1.
	if id := s.complete(1); id != 11 {
		t.Errorf("completing WQE 1: wr_id %d", id)
	}
	if s.tail != 1 || beOrder.Uint16(s.wqe(3)[srqNextIndex:]) != 1 {
		t.Errorf("after freeing 1: tail %d, WQE 3 links to %d", s.tail, beOrder.Uint16(s.wqe(3)[srqNextIndex:]))
	}
	if n, err := s.PostRecv([]provider.RecvWR{{WRID: 12}}); n != 1 || err != nil || s.wrid[3] != 12 || s.head != 1 {
		t.Errorf("post after a free: %d, %v; wr_ids %v, head %d", n, err, s.wrid, s.head)
	}
	if db := dbWord(s.db, 0); db != 4 {
		t.Errorf("doorbell record %d, want 4", db)
	}
	if err := s.Modify(kverbs.SRQMaxWR, kverbs.SRQAttr{MaxWR: 100}); !errors.Is(err, errs.ErrNotSupported) {
		t.Errorf("resize: %v, want ErrNotSupported", err)
	}
}

// A model of the device's side of the list: it takes posted WQEs in list
// order, following each one's next index, and completes them in any
// order. Through many rounds every receive completes once, with its
// wr_id, and the SRQ never holds more than MaxWR.
func TestSRQFreeListRandom(t *testing.T) {
	c, _ := testCtx(t)
	s, qp := testSRQ(t, c, 15, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	q := testCQ(t, c, 64, 64)
	var hwHead, hwCI uint32 // the device's place in the list, and WQEs taken
	var taken []uint16      // WQEs taken, not yet completed
	posted := map[uint64]bool{}
	next := uint64(1)
	pi := uint32(0)
	for round := 0; round < 2000; round++ {
		// Post a few.
		k := rng.IntN(5)
		wrs := make([]provider.RecvWR, k)
		for i := range wrs {
			wrs[i] = provider.RecvWR{WRID: next + uint64(i), SGL: []provider.SGE{{Addr: 1, Length: 1, LKey: 1}}}
		}
		n, _ := s.PostRecv(wrs)
		for i := range n {
			posted[wrs[i].WRID] = true
		}
		next += uint64(k)
		if uint32(len(posted)) > s.MaxWR() {
			t.Fatalf("%d receives outstanding in an SRQ of %d", len(posted), s.MaxWR())
		}
		// The device takes a few.
		for m := rng.IntN(5); m > 0 && uint16(dbWord(s.db, 0)) != uint16(hwCI); m-- {
			taken = append(taken, uint16(hwHead))
			hwHead = uint32(beOrder.Uint16(s.wqe(hwHead)[srqNextIndex:]))
			hwCI++
		}
		// And completes a few, in any order.
		for m := rng.IntN(4); m > 0 && len(taken) > 0; m-- {
			j := rng.IntN(len(taken))
			ctr := taken[j]
			taken = append(taken[:j], taken[j+1:]...)
			writeCQE(q.buf, 64, 64, pi, cqeFields{opcode: uapi.MLX5_CQE_RESP_SEND, qpn: qp.k.QPN, uidx: testUIDX, counter: ctr, byteCnt: 1})
			pi++
			wcs := make([]cq.WC, 1)
			if q.pollLocked(wcs) != 1 {
				t.Fatal("no completion")
			}
			if !posted[wcs[0].WRID] {
				t.Fatalf("round %d: completion of WQE %d with wr_id %d, not outstanding", round, ctr, wcs[0].WRID)
			}
			delete(posted, wcs[0].WRID)
		}
	}
	if next < 1000 {
		t.Errorf("only %d receives posted", next)
	}
}

// A receive CQE of a destroyed QP on an SRQ gives its WQE back and is
// not reported; cleaning a QP's completions out of a CQ does too.
func TestSRQStaleAndCleanedCQEs(t *testing.T) {
	c, _ := testCtx(t)
	s, qp := testSRQ(t, c, 3, 1)
	q := testCQ(t, c, 8, 64)
	if n, err := s.PostRecv(make([]provider.RecvWR, 3)); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	writeCQE(q.buf, 8, 64, 0, cqeFields{opcode: uapi.MLX5_CQE_RESP_SEND, uidx: testUIDX, counter: 0})
	writeCQE(q.buf, 8, 64, 1, cqeFields{opcode: uapi.MLX5_CQE_RESP_ERR, uidx: testUIDX, counter: 1, syndrome: uapi.MLX5_CQE_SYNDROME_WR_FLUSH_ERR})
	qp.CleanCQ(q) // as at RESET
	if n := q.pollLocked(make([]cq.WC, 4)); n != 0 {
		t.Errorf("%d completions after the clean", n)
	}
	writeCQE(q.buf, 8, 64, 2, cqeFields{opcode: uapi.MLX5_CQE_RESP_SEND, uidx: testUIDX, counter: 2})
	qp.Release() // destroyed, its completion still queued
	if n := q.pollLocked(make([]cq.WC, 4)); n != 0 {
		t.Errorf("%d completions of a destroyed QP", n)
	}
	if n, err := s.PostRecv(make([]provider.RecvWR, 3)); n != 3 || err != nil {
		t.Errorf("after the clean and the stale completion: %d of 3 posted, %v", n, err)
	}
	// The SRQ's release takes the destroyed QP's stand-in out of the table.
	s.Release()
	if m := c.qps.Load(); m != nil && (*m)[testUIDX] != nil {
		t.Errorf("the stand-in outlived its SRQ: %+v", (*m)[testUIDX])
	}
}

// A post to an SRQ and the poll of its receive's completion allocate
// nothing.
func TestSRQHotPathsAllocateNothing(t *testing.T) {
	c, _ := testCtx(t)
	s, qp := testSRQ(t, c, 15, 1)
	q := testCQ(t, c, 64, 64)
	wrs := []provider.RecvWR{{WRID: 1, SGL: []provider.SGE{{Addr: 1, Length: 1, LKey: 1}}}}
	wcs := make([]cq.WC, 4)
	pi := uint32(0)
	if n := testing.AllocsPerRun(100, func() {
		i := s.head
		if _, err := s.PostRecv(wrs); err != nil {
			t.Fatal(err)
		}
		writeCQE(q.buf, 64, 64, pi, cqeFields{opcode: uapi.MLX5_CQE_RESP_SEND, qpn: qp.k.QPN, uidx: testUIDX, counter: uint16(i), byteCnt: 1})
		pi++
		if q.pollLocked(wcs) != 1 || wcs[0].WRID != 1 {
			t.Fatalf("poll: %+v", wcs[0])
		}
	}); n != 0 {
		t.Errorf("SRQ post and poll allocate %v times", n)
	}
}
