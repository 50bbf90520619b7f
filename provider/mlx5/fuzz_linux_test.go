package mlx5

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/uapi"
)

// FuzzPoll polls a ring of 8 CQEs whose every byte is fuzz input, from a
// fuzzed consumer index, with one RC and one UD QP to find. Whatever the
// bytes say, Poll must not panic, must return no more than asked, and
// every completion it returns must be exactly what an independent reading
// of the CQE at the generated mirror's offsets says: the right kind, the
// right queue's wr_id, and a success only from a success opcode.
func FuzzPoll(f *testing.F) {
	seed := make([]byte, 8*64)
	for i := 0; i < 8; i++ {
		writeCQE(seed, 8, 64, uint32(i), cqeFields{opcode: uint8(i % 3 * 2), wqeOp: uapi.MLX5_OPCODE_SEND, uidx: testUIDX, qpn: 0x1234, counter: uint16(i)})
	}
	f.Add(seed, uint32(0), uint8(8))
	f.Add(seed, uint32(8), uint8(3))
	f.Add(make([]byte, 8*64), uint32(0), uint8(8))
	f.Fuzz(func(t *testing.T, ring []byte, ci uint32, want uint8) {
		c, _ := testCtx(t)
		rc := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1})
		c.setQP(testUIDX, rc)
		ud := testQP(t, c, uapi.IB_UVERBS_QPT_UD, kverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1})
		ud.key = 9
		c.setQP(testUIDX, rc)
		c.setQP(9, ud)
		for _, qp := range []*QP{rc, ud} {
			for i := range qp.sq.wrid {
				qp.sq.wrid[i], qp.sq.wqeHead[i] = uint64(qp.key)<<32|1<<16|uint64(i), uint32(i)
			}
			for i := range qp.rq.wrid {
				qp.rq.wrid[i] = uint64(qp.key)<<32 | 2<<16 | uint64(i)
			}
		}
		q := testCQ(t, c, 8, 64)
		copy(q.buf, ring)
		q.ci = ci
		before := append([]byte(nil), q.buf...)
		wcs := make([]cq.WC, want%16)
		n := q.Poll(wcs)
		if n > len(wcs) || q.ci-ci > 8 {
			t.Fatalf("polled %d into %d slots, consumer index moved %d in a ring of 8", n, len(wcs), q.ci-ci)
		}
		if string(before) != string(q.buf) {
			t.Fatal("Poll wrote into the CQ ring")
		}
		// Replay the consumed CQEs independently.
		var off uapi.Mlx5CQE64
		k := 0
		for i := ci; i != q.ci; i++ {
			e := before[(i&7)*64:][:64]
			oo := e[unsafe.Offsetof(off.OpOwn)]
			op := oo >> 4
			if op == 15 || uint32(oo&1) != i>>3&1 {
				t.Fatalf("CQE %d (op_own %#x) consumed but not software-owned", i, oo)
			}
			key := binary.BigEndian.Uint32(e[unsafe.Offsetof(off.SrqnUIDX):]) & 0xffffff
			var qp *QP
			switch key {
			case testUIDX:
				qp = rc
			case 9:
				qp = ud
			default:
				continue // no such QP: dropped, reported as nothing
			}
			if k >= n {
				t.Fatalf("CQE %d consumed but not returned", i)
			}
			w := wcs[k]
			k++
			ctr := uint32(binary.BigEndian.Uint16(e[unsafe.Offsetof(off.WqeCounter):]))
			okFormat := oo>>2&3 == 0
			switch {
			case !okFormat || (op != 0 && op != 1 && op != 2 && op != 3 && op != 4 && op != 13 && op != 14):
				if w.Status != cq.GeneralErr {
					t.Fatalf("CQE %d: op_own %#x undecodable, returned status %v", i, oo, w.Status)
				}
			case op == 0 || op == 13:
				if op == 0 && w.Status != cq.Success && w.Status != cq.GeneralErr {
					t.Fatalf("CQE %d: requester CQE gave status %v", i, w.Status)
				}
				if w.Status != cq.GeneralErr || op == 13 {
					if want := qp.sq.wrid[ctr&(qp.sq.wqeCnt-1)]; w.WRID != want {
						t.Fatalf("CQE %d: send wr_id %#x, want %#x", i, w.WRID, want)
					}
				}
			default:
				if (op == 14) == (w.Status == cq.Success) {
					t.Fatalf("CQE %d: opcode %d gave status %v", i, op, w.Status)
				}
				if want := qp.rq.wrid[ctr&(qp.rq.wqeCnt-1)]; w.WRID != want {
					t.Fatalf("CQE %d: receive wr_id %#x, want %#x", i, w.WRID, want)
				}
			}
		}
		if k != n {
			t.Fatalf("returned %d completions for %d CQEs", n, k)
		}
	})
}
