package mlx5

import (
	"encoding/binary"
	"fmt"
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/testutil/sendfuzz"
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
		for _, qp := range []*queuePair{rc, ud} {
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
		n := q.pollLocked(wcs)
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
			var qp *queuePair
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

// FuzzPostSend holds PostSend's fast paths (postPlain, postAtomics) to the
// checked one, as TestPostSendPlainRuns does, on requests whose every field
// is fuzz input: the first two bytes choose the QP type (RC, UC or UD) and
// whether it signals every request; the rest are requests, in batches, as
// sendfuzz.Batches reads them (opcode, flags with SendInline, up to five
// SGEs of sizes from 0 to over 2 GiB, remote address, AH, where a batch
// ends and whether the device then consumes everything posted). Whatever they say,
// both QPs must post the same requests, publish the same bytes and refuse
// the same way (postPair.post), and nothing may panic.
func FuzzPostSend(f *testing.F) {
	f.Add([]byte{0, 0, 2, 2, 1, 1, 0, 0x10, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 5, 1, 1, 1, 0, 0x10, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 6, 8, 2, 3, 0, 0x20, 0, 0, 20, 30, 0, 0, 0, 0, 0, 0, 7, 0, 1, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 0, 0, 2, 1, 1 | 3<<2, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 1, 10, 1, 1 | 2<<2, 0, 0, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 1, 0, 8, 3, 3, 0, 0, 0, 0, 255, 255, 254, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || len(data) > 2+64*sendfuzz.RecordSize {
			return
		}
		typ := []uint8{uapi.IB_UVERBS_QPT_RC, uapi.IB_UVERBS_QPT_UC, uapi.IB_UVERBS_QPT_UD}[int(data[0])%3]
		p := newPostPair(t, typ, data[1]&1 != 0, kverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 4, MaxSendSGE: 4, MaxRecvSGE: 1, MaxInlineData: 60})
		payload, err := allocDMA(4096) // what inline requests copy, outside the Go heap
		if err != nil {
			t.Fatal(err)
		}
		defer payload.free()
		base := uint64(uintptr(payload.ptr()))
		ah := &addressHandle{}
		for i := range ah.av {
			ah.av[i] = byte(i * 7)
		}
		ahs := []*provider.AHRef{nil, {AH: otherAH{}}, {AH: ah}, {AH: &addressHandle{}}}
		sendfuzz.Batches(data[2:], base, ahs, func(last int, wrs []provider.SendWR, consume bool) {
			p.post(t, fmt.Sprintf("the batch ending with request %d", last), wrs)
			if consume {
				p.consume()
			}
		})
	})
}
