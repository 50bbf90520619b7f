package mlx5

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/goverbs/goverbs/internal/cqseam"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uapi"
)

// These tests play the device by hand, with no kernel: CQEs are written
// field by field at the offsets of the generated mirror of struct
// mlx5_cqe64 (not the provider's constants), big-endian, owner bit by the
// pass; WQEs are read back the same way.

var (
	offCQE   uapi.Mlx5CQE64
	offErr   uapi.Mlx5ErrCQE
	beOrder  = binary.BigEndian
	testUIDX = uint32(7)
)

// cqeFields is what a test CQE holds.
type cqeFields struct {
	opcode   uint8
	solicit  bool
	wqeOp    uint8 // requester: the WQE opcode
	qpn      uint32
	uidx     uint32
	counter  uint16
	byteCnt  uint32
	imm      uint32
	rqpn     uint32 // flags_rqpn
	slid     uint16
	mlPath   uint8
	syndrome uint8
	vendor   uint8
	ts       uint64 // the timestamp, but in an error CQE
}

// writeCQE writes CQE number pi (free-running) into a ring of n CQEs of
// size bytes, as the device would: every field, then op_own.
func writeCQE(ring []byte, n, size, pi uint32, f cqeFields) {
	c := ring[(pi&(n-1))*size+size-64:][:64]
	clear(c)
	c[unsafe.Offsetof(offCQE.MlPath)] = f.mlPath
	beOrder.PutUint16(c[unsafe.Offsetof(offCQE.Slid):], f.slid)
	beOrder.PutUint32(c[unsafe.Offsetof(offCQE.FlagsRqpn):], f.rqpn)
	beOrder.PutUint32(c[unsafe.Offsetof(offCQE.SrqnUIDX):], f.uidx)
	beOrder.PutUint32(c[unsafe.Offsetof(offCQE.ImmInvalPkey):], f.imm)
	beOrder.PutUint32(c[unsafe.Offsetof(offCQE.ByteCnt):], f.byteCnt)
	beOrder.PutUint32(c[unsafe.Offsetof(offCQE.SopDropQPN):], uint32(f.wqeOp)<<24|f.qpn)
	beOrder.PutUint16(c[unsafe.Offsetof(offCQE.WqeCounter):], f.counter)
	if f.opcode == uapi.MLX5_CQE_REQ_ERR || f.opcode == uapi.MLX5_CQE_RESP_ERR {
		c[unsafe.Offsetof(offErr.Syndrome)] = f.syndrome
		c[unsafe.Offsetof(offErr.VendorErrSynd)] = f.vendor
	} else {
		beOrder.PutUint64(c[unsafe.Offsetof(offCQE.Timestamp):], f.ts)
	}
	oo := f.opcode<<4 | uint8(pi/n&1)
	if f.solicit {
		oo |= 2
	}
	c[unsafe.Offsetof(offCQE.OpOwn)] = oo
}

// testCtx is a context with no kernel: a UAR page of ordinary memory.
func testCtx(t testing.TB) (*context, []byte) {
	t.Helper()
	uar, err := allocDMA(4096)
	if err != nil {
		t.Fatal(err)
	}
	c := &context{cqeVersion: 1, cqUAR: uarPage{base: uar.ptr()}}
	t.Cleanup(func() { c.dbs.release(); uar.free() })
	return c, uar
}

func testCQ(t testing.TB, c *context, n, size uint32) *completionQueue {
	t.Helper()
	q := &completionQueue{ctx: c, cqeSize: size, cqn: 0x42}
	if err := q.alloc(n); err != nil {
		t.Fatal(err)
	}
	db, err := c.dbs.get()
	if err != nil {
		t.Fatal(err)
	}
	q.db = db
	t.Cleanup(q.Release)
	return q
}

func testQP(t testing.TB, c *context, typ uint8, cp kverbs.QPCap) *queuePair {
	t.Helper()
	q, err := c.newQP(typ, false, cp)
	if err != nil {
		t.Fatal(err)
	}
	q.k.QPN, q.key, q.k.Cap = 0x1234, testUIDX, q.cap
	bf, err := allocDMA(4096)
	if err != nil {
		t.Fatal(err)
	}
	q.bf = unsafe.Add(bf.ptr(), bfOffset)
	c.setQP(q.key, q)
	t.Cleanup(func() { q.Release(); bf.free() })
	return q
}

func dbWord(p unsafe.Pointer, off uintptr) uint32 {
	return beOrder.Uint32(unsafe.Slice((*byte)(unsafe.Add(p, off)), 4))
}

func TestCQStartsInvalid(t *testing.T) {
	c, _ := testCtx(t)
	for _, size := range []uint32{64, 128} {
		q := testCQ(t, c, 8, size)
		for i := uint32(0); i < 8; i++ {
			if op := q.buf[i*size+size-1]; op != 0xf0 {
				t.Errorf("%d-byte CQE %d: op_own %#x, want 0xf0 (invalid)", size, i, op)
			}
		}
		if n := q.pollLocked(make([]cq.WC, 4)); n != 0 {
			t.Errorf("%d-byte CQEs: a fresh CQ polled %d", size, n)
		}
	}
}

// TestPollDecodes checks each CQE kind, field by field.
func TestPollDecodes(t *testing.T) {
	c, _ := testCtx(t)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1})
	ud := testQP(t, c, uapi.IB_UVERBS_QPT_UD, kverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1})
	c.setQP(testUIDX, qp)
	ud.key = 9
	c.setQP(9, ud)
	for i := range qp.sq.wrid {
		qp.sq.wrid[i], qp.sq.wqeHead[i] = 100+uint64(i), uint32(i)
	}
	for i := range qp.rq.wrid {
		qp.rq.wrid[i] = 200 + uint64(i)
		ud.rq.wrid[i] = 300 + uint64(i)
	}
	tests := []struct {
		name string
		f    cqeFields
		want cq.WC
	}{
		{"send", cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND, qpn: 0x1234, uidx: 7, counter: 3},
			cq.WC{WRID: 103, Opcode: cq.OpSend, QPNum: 0x1234}},
		{"send with imm", cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND_IMM, qpn: 0x1234, uidx: 7, counter: 9},
			cq.WC{WRID: 101, Opcode: cq.OpSend, QPNum: 0x1234}},
		{"rdma write", cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_RDMA_WRITE_IMM, qpn: 0x1234, uidx: 7, counter: 0},
			cq.WC{WRID: 100, Opcode: cq.OpRDMAWrite, QPNum: 0x1234}},
		{"rdma read", cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_RDMA_READ, qpn: 0x1234, uidx: 7, counter: 2, byteCnt: 4096},
			cq.WC{WRID: 102, Opcode: cq.OpRDMARead, QPNum: 0x1234, ByteLen: 4096}},
		{"compare and swap", cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_ATOMIC_CS, qpn: 0x1234, uidx: 7, counter: 4},
			cq.WC{WRID: 104, Opcode: cq.OpCompSwap, QPNum: 0x1234, ByteLen: 8}},
		{"fetch and add", cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_ATOMIC_FA, qpn: 0x1234, uidx: 7, counter: 5},
			cq.WC{WRID: 105, Opcode: cq.OpFetchAdd, QPNum: 0x1234, ByteLen: 8}},
		{"recv", cqeFields{opcode: uapi.MLX5_CQE_RESP_SEND, qpn: 0x1234, uidx: 7, counter: 1, byteCnt: 77},
			cq.WC{WRID: 201, Opcode: cq.OpRecv, QPNum: 0x1234, ByteLen: 77}},
		{"recv with imm", cqeFields{opcode: uapi.MLX5_CQE_RESP_SEND_IMM, qpn: 0x1234, uidx: 7, counter: 2, byteCnt: 5, imm: 0xa1b2c3d4},
			cq.WC{WRID: 202, Opcode: cq.OpRecv, QPNum: 0x1234, ByteLen: 5, Imm: 0xa1b2c3d4, Flags: cq.WithImm}},
		{"rdma write with imm", cqeFields{opcode: uapi.MLX5_CQE_RESP_WR_IMM, qpn: 0x1234, uidx: 7, counter: 3, imm: 0x01020304},
			cq.WC{WRID: 203, Opcode: cq.OpRecvRDMAWithImm, QPNum: 0x1234, Imm: 0x01020304, Flags: cq.WithImm}},
		{"recv with invalidate", cqeFields{opcode: uapi.MLX5_CQE_RESP_SEND_INV, qpn: 0x1234, uidx: 7, counter: 4, imm: 0x5566},
			cq.WC{WRID: 204, Opcode: cq.OpRecv, QPNum: 0x1234, Imm: 0x5566, Flags: cq.WithInv}},
		{"ud recv with grh", cqeFields{opcode: uapi.MLX5_CQE_RESP_SEND, qpn: 0x99, uidx: 9, counter: 0, byteCnt: 40 + 8,
			rqpn: 1<<28 | 5<<24 | 0xabcdef, slid: 0x33, mlPath: 0x85},
			cq.WC{WRID: 300, Opcode: cq.OpRecv, QPNum: 0x99, ByteLen: 48, SrcQP: 0xabcdef, SL: 5, SLID: 0x33, DLIDPathBits: 5, Flags: cq.WithGRH}},
		{"send error", cqeFields{opcode: uapi.MLX5_CQE_REQ_ERR, qpn: 0x1234, uidx: 7, counter: 6,
			syndrome: uapi.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, vendor: 0x88},
			cq.WC{WRID: 106, Status: cq.RemAccessErr, VendorErr: 0x88, QPNum: 0x1234}},
		{"flushed recv", cqeFields{opcode: uapi.MLX5_CQE_RESP_ERR, qpn: 0x1234, uidx: 7, counter: 5,
			syndrome: uapi.MLX5_CQE_SYNDROME_WR_FLUSH_ERR},
			cq.WC{WRID: 205, Status: cq.WRFlushErr, QPNum: 0x1234}},
		{"unknown syndrome", cqeFields{opcode: uapi.MLX5_CQE_REQ_ERR, qpn: 0x1234, uidx: 7, counter: 7, syndrome: 0x77},
			cq.WC{WRID: 107, Status: cq.GeneralErr, QPNum: 0x1234}},
	}
	for _, size := range []uint32{64, 128} {
		q := testCQ(t, c, 4, size)
		for i, tc := range tests {
			writeCQE(q.buf, 4, size, uint32(i), tc.f)
			var wc [2]cq.WC
			if n := q.pollLocked(wc[:]); n != 1 {
				t.Errorf("%d-byte CQE, %s: polled %d, want 1", size, tc.name, n)
				continue
			}
			if d := cmp.Diff(tc.want, wc[0]); d != "" {
				t.Errorf("%d-byte CQE, %s (-want +got):\n%s", size, tc.name, d)
			}
			if ci := dbWord(q.db, 0); ci != uint32(i+1) {
				t.Errorf("%d-byte CQE, %s: doorbell record consumer index %d, want %d", size, tc.name, ci, i+1)
			}
		}
	}
}

// TestPollOwnerBitAcrossPasses fills and drains a small ring many times
// in batches of 1, 3 and 16: the owner bit flips each pass, and a CQE
// left from the previous pass is never taken.
func TestPollOwnerBitAcrossPasses(t *testing.T) {
	c, _ := testCtx(t)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	for _, batch := range []int{1, 3, 16} {
		q := testCQ(t, c, 8, 64)
		wcs := make([]cq.WC, batch)
		var pi, got uint32
		for pass := 0; pass < 5; pass++ {
			for k := 0; k < 8; k++ { // fill the ring
				idx := pi & (qp.sq.wqeCnt - 1)
				qp.sq.wrid[idx], qp.sq.wqeHead[idx] = uint64(pi), pi
				writeCQE(q.buf, 8, 64, pi, cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND, qpn: 0x1234, uidx: testUIDX, counter: uint16(idx)})
				pi++
			}
			for {
				n := q.pollLocked(wcs)
				if n == 0 {
					break
				}
				for _, w := range wcs[:n] {
					if w.WRID != uint64(got) {
						t.Fatalf("batch %d: wr_id %d, want %d", batch, w.WRID, got)
					}
					got++
				}
			}
			if got != pi {
				t.Fatalf("batch %d, pass %d: polled %d of %d", batch, pass, got, pi)
			}
		}
		if ci := dbWord(q.db, 0); ci != pi {
			t.Errorf("doorbell record consumer index %d, want %d", ci, pi)
		}
	}
}

// TestUnsignaledTailAdvance: a completion frees its WQE and every
// unsignaled one before it.
func TestUnsignaledTailAdvance(t *testing.T) {
	c, _ := testCtx(t)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	q := testCQ(t, c, 8, 64)
	mr := make([]byte, 64)
	sge := []provider.SGE{{Addr: uint64(uintptr(unsafe.Pointer(&mr[0]))), Length: 8, LKey: 1}}
	post := func(id uint64, fl uint32) error {
		_, err := qp.PostSend([]provider.SendWR{{WRID: id, Opcode: provider.WRSend, Flags: fl, SGL: sge}})
		return err
	}
	for i := uint64(0); i < uint64(qp.sq.maxPost); i++ {
		if err := post(i, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := post(99, 0); err == nil {
		t.Fatal("a full send queue took one more")
	}
	// The device completes the last WQE (as if it were signaled).
	last := qp.sq.curPost - 1
	writeCQE(q.buf, 8, 64, 0, cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND, qpn: 0x1234, uidx: testUIDX, counter: uint16(last)})
	var wc [1]cq.WC
	if n := q.pollLocked(wc[:]); n != 1 || wc[0].WRID != uint64(qp.sq.maxPost-1) {
		t.Fatalf("polled %d: %+v", n, wc[0])
	}
	for i := uint32(0); i < qp.sq.maxPost; i++ {
		if err := post(uint64(i), provider.SendSignaled); err != nil {
			t.Fatalf("after the completion, post %d: %v", i, err)
		}
	}
}

// TestArm checks the arm word in the doorbell record and the UAR store:
// BE32(sn<<28 | cmd | ci) then BE32(cqn), and that sn follows events read.
func TestArm(t *testing.T) {
	c, uar := testCtx(t)
	q := testCQ(t, c, 8, 64)
	q.ci = 0x1000005
	for _, tc := range []struct {
		sol    bool
		events int
		want   uint32
	}{
		{false, 0, 5},
		{true, 0, 0<<28 | 1<<24 | 5},
		{false, 1, 1<<28 | 5},
		{true, 3, 0<<28 | 1<<24 | 5}, // sn wraps at 4
	} {
		for i := 0; i < tc.events; i++ {
			q.EventRead()
		}
		if err := q.ReqNotify(tc.sol); err != nil {
			t.Fatal(err)
		}
		if got := dbWord(q.db, 4); got != tc.want {
			t.Errorf("solicited=%v after %d events: arm word %#x, want %#x", tc.sol, q.armSN, got, tc.want)
		}
		d := uar[uapi.MLX5_CQ_DOORBELL:][:8]
		if got, cqn := beOrder.Uint32(d), beOrder.Uint32(d[4:]); got != tc.want || cqn != 0x42 {
			t.Errorf("UAR doorbell %x, want BE32(%#x) BE32(0x42)", d, tc.want)
		}
	}
}

// TestPostSendWQE reads posted WQEs back the way the device would, from
// the offsets of the generated segment mirrors, across the ring's wrap.
func TestPostSendWQE(t *testing.T) {
	c, _ := testCtx(t)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 60})
	var ctrl uapi.Mlx5WqeCtrlSeg
	var data uapi.Mlx5WqeDataSeg
	var raddr uapi.Mlx5WqeRaddrSeg
	// Outside the Go heap, as a registered buffer would be: the SGE holds
	// its address as a number, and a Go stack may move.
	payload, err := allocDMA(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer payload.free()
	copy(payload, "0123456789abcdefghijklmnopqrstuvwxyz0123456789")
	addr := uint64(uintptr(payload.ptr()))
	sq := qp.sq.mem
	// Post enough to wrap the ring: each WQE below is one or two blocks.
	for i := 0; i < 3*int(qp.sq.wqeCnt); i++ {
		wqeIdx := qp.sq.curPost
		start := wqeIdx & (qp.sq.wqeCnt - 1)
		wr := provider.SendWR{WRID: uint64(i), Opcode: provider.WRRDMAWriteWithImm, Flags: provider.SendSignaled | provider.SendSolicited,
			SGL: []provider.SGE{{Addr: addr, Length: 10, LKey: 0x11}, {Addr: addr + 10, Length: 20, LKey: 0x22}},
			Imm: 0xdeadbeef, RemoteAddr: 0x1122334455667788, RKey: 0x99}
		if i%2 == 1 {
			wr.Opcode, wr.Flags = provider.WRSend, provider.SendInline
		}
		if _, err := qp.PostSend([]provider.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		seg := func(k int) []byte { return sq[(int(start)*64+k*16)%len(sq):][:16] }
		c0 := seg(0)
		opc := beOrder.Uint32(c0[unsafe.Offsetof(ctrl.OpmodIdxOpcode):])
		qpnDS := beOrder.Uint32(c0[unsafe.Offsetof(ctrl.QPNDs):])
		if qpnDS>>8 != 0x1234 {
			t.Errorf("WQE %d: qpn %#x", i, qpnDS>>8)
		}
		fm := c0[unsafe.Offsetof(ctrl.FmCeSe)]
		if i%2 == 0 {
			if opc&0xff != uapi.MLX5_OPCODE_RDMA_WRITE_IMM || fm != uapi.MLX5_WQE_CTRL_CQ_UPDATE|uapi.MLX5_WQE_CTRL_SOLICITED {
				t.Errorf("WQE %d: opcode %#x fm_ce_se %#x", i, opc&0xff, fm)
			}
			if imm := beOrder.Uint32(c0[unsafe.Offsetof(ctrl.Imm):]); imm != 0xdeadbeef {
				t.Errorf("WQE %d: imm %#x", i, imm)
			}
			if ds := qpnDS & 0xff; ds != 4 {
				t.Errorf("WQE %d: ds %d, want 4 (ctrl, raddr, 2 data)", i, ds)
			}
			r := seg(1)
			if a, k := beOrder.Uint64(r[unsafe.Offsetof(raddr.Raddr):]), beOrder.Uint32(r[unsafe.Offsetof(raddr.Rkey):]); a != 0x1122334455667788 || k != 0x99 {
				t.Errorf("WQE %d: raddr %#x rkey %#x", i, a, k)
			}
			for k, want := range []provider.SGE{{Addr: addr, Length: 10, LKey: 0x11}, {Addr: addr + 10, Length: 20, LKey: 0x22}} {
				d := seg(2 + k)
				got := provider.SGE{Addr: beOrder.Uint64(d[unsafe.Offsetof(data.Addr):]), Length: beOrder.Uint32(d[unsafe.Offsetof(data.ByteCount):]), LKey: beOrder.Uint32(d[unsafe.Offsetof(data.Lkey):])}
				if got != want {
					t.Errorf("WQE %d data seg %d: %+v, want %+v", i, k, got, want)
				}
			}
		} else {
			if opc&0xff != uapi.MLX5_OPCODE_SEND || fm != 0 {
				t.Errorf("WQE %d: opcode %#x fm_ce_se %#x", i, opc&0xff, fm)
			}
			// ctrl + inline (4 + 30 bytes, padded to 48) = 4 segments.
			if ds := qpnDS & 0xff; ds != 4 {
				t.Errorf("WQE %d: ds %d, want 4", i, ds)
			}
			var got []byte
			for k := 1; k < 4; k++ {
				got = append(got, seg(k)...)
			}
			if n := beOrder.Uint32(got); n != 30|uapi.MLX5_INLINE_SEG {
				t.Errorf("WQE %d: inline byte count %#x", i, n)
			}
			if string(got[4:34]) != string(payload[:30]) {
				t.Errorf("WQE %d: inline data %q", i, got[4:34])
			}
		}
		if opc>>8 != uint32(wqeIdx)&0xffff {
			t.Errorf("WQE %d: index %#x, want %#x", i, opc>>8, wqeIdx)
		}
		if db := dbWord(qp.db, 4); db != qp.sq.curPost&0xffff {
			t.Errorf("WQE %d: send doorbell record %d, want %d", i, db, qp.sq.curPost)
		}
		bf := unsafe.Slice((*byte)(qp.bf), 8)
		if string(bf) != string(c0[:8]) {
			t.Errorf("WQE %d: the UAR doorbell %x is not the ctrl segment's first 8 bytes %x", i, bf, c0[:8])
		}
		qp.sq.tail.Store(qp.sq.head) // the device is done with it
	}
}

func TestPostRecvWQE(t *testing.T) {
	c, _ := testCtx(t)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 3})
	if qp.rq.maxGS != 4 || qp.rq.shift != 6 {
		t.Fatalf("3 receive SGEs: %d segments of %d bytes, want 4 of 64", qp.rq.maxGS, 1<<qp.rq.shift)
	}
	sgl := []provider.SGE{{Addr: 0x1000, Length: 16, LKey: 5}, {Addr: 0x2000, Length: 0, LKey: 6}, {Addr: 0x3000, Length: 32, LKey: 7}}
	if n, err := qp.PostRecv([]provider.RecvWR{{WRID: 1, SGL: sgl}, {WRID: 2}}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	w := qp.rq.mem[:64]
	want := [][3]uint64{{16, 5, 0x1000}, {32, 7, 0x3000}, {0, uapi.MLX5_INVALID_LKEY, 0}}
	for k, s := range want {
		d := w[k*16:]
		if got := [3]uint64{uint64(beOrder.Uint32(d)), uint64(beOrder.Uint32(d[4:])), beOrder.Uint64(d[8:])}; got != s {
			t.Errorf("segment %d: %v, want %v", k, got, s)
		}
	}
	if d := qp.rq.mem[64:]; beOrder.Uint32(d[4:]) != uapi.MLX5_INVALID_LKEY {
		t.Errorf("an empty receive is not terminated at once")
	}
	if db := dbWord(qp.db, 0); db != 2 {
		t.Errorf("receive doorbell record %d, want 2", db)
	}
	if n, err := qp.PostRecv(make([]provider.RecvWR, 3)); n != 2 || err == nil {
		t.Errorf("posting 3 into 2 free slots: %d, %v", n, err)
	}

	// A full slot (as many SGEs as it holds) has no terminator, and
	// nothing is written past it.
	qp = testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 4})
	for i := range qp.rq.mem[64:128] {
		qp.rq.mem[64+i] = 0xee
	}
	full := []provider.SGE{{Addr: 1, Length: 1, LKey: 1}, {Addr: 2, Length: 2, LKey: 2}, {Addr: 3, Length: 3, LKey: 3}, {Addr: 4, Length: 4, LKey: 4}}
	if n, err := qp.PostRecv([]provider.RecvWR{{WRID: 3, SGL: full}}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	for k := range 4 {
		d := qp.rq.mem[k*16:]
		if got := [3]uint64{uint64(beOrder.Uint32(d)), uint64(beOrder.Uint32(d[4:])), beOrder.Uint64(d[8:])}; got != [3]uint64{uint64(k + 1), uint64(k + 1), uint64(k + 1)} {
			t.Errorf("full slot, segment %d: %v", k, got)
		}
	}
	if !bytes.Equal(qp.rq.mem[64:128], bytes.Repeat([]byte{0xee}, 64)) {
		t.Errorf("a full slot's receive wrote into the next slot: %x", qp.rq.mem[64:128])
	}
}

func TestHotPathsAllocateNothing(t *testing.T) {
	c, _ := testCtx(t)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	q := testCQ(t, c, 16, 64)
	c2, _ := testCtx(t) // the stamped CQ's completions name a QP of its own, never posted to
	testQP(t, c2, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
	stamped := testCQ(t, c2, 16, 64)
	stamped.ts = cqseam.WallClock
	var l, sl cqseam.RingLock
	wcs := make([]cq.WC, 16)
	swr := []provider.SendWR{{Opcode: provider.WRSend, SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}}
	rwr := []provider.RecvWR{{SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}}
	awr := []provider.SendWR{{Opcode: provider.WRAtomicFetchAdd, SGL: swr[0].SGL, RemoteAddr: 0x2000, CompareAdd: 1}}
	for name, f := range map[string]func(){
		"poll empty": func() { q.pollLocked(wcs) },
		// The polls complete slot 0 of qp, whatever a post put there
		// last, so each puts the send queue back empty, as the posts do:
		// the tail such a completion gives may lie far behind the posts'
		// head, and fill the queue for the next post (in some orders of
		// this map's entries).
		"poll one": func() {
			writeCQE(q.buf, 16, 64, q.ci, cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND, qpn: 0x1234, uidx: testUIDX})
			q.pollLocked(wcs)
			qp.sq.tail.Store(qp.sq.head)
		},
		"poll ring empty": func() { q.PollRing(wcs, &l) },
		"poll ring one": func() {
			writeCQE(q.buf, 16, 64, q.ci, cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND, qpn: 0x1234, uidx: testUIDX})
			if n, _ := q.PollRing(wcs, &l); n != 1 {
				t.Errorf("PollRing of one completion: %d", n)
			}
			qp.sq.tail.Store(qp.sq.head)
		},
		"poll ring one, wall-clock timestamps": func() {
			writeCQE(stamped.buf, 16, 64, stamped.ci, cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND, qpn: 0x1234, uidx: testUIDX, ts: 7<<32 | 9})
			if n, _ := stamped.PollRing(wcs, &sl); n != 1 || wcs[0].Timestamp != 7e9+9 {
				t.Errorf("PollRing of one stamped completion: %d, %+v", n, wcs[0])
			}
		},
		"req notify": func() { q.ReqNotify(false) },
		"post send":  func() { qp.PostSend(swr); qp.sq.tail.Store(qp.sq.head) },
		"post atomic": func() {
			if _, err := qp.PostSend(awr); err != nil {
				t.Error(err)
			}
			qp.sq.tail.Store(qp.sq.head)
		},
		"post recv": func() { qp.PostRecv(rwr); qp.rq.tail.Store(qp.rq.head) },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s allocates %.1f times", name, a)
		}
	}
}

// TestPollTimestamps: a CQ made without timestamps reports 0 whatever
// the CQE holds; one with device-clock timestamps the CQE's ticks, as
// they are; one with wall-clock timestamps the CQE's seconds and
// nanoseconds as nanoseconds. An error completion has none, on any CQ,
// and a CQE of a QP no longer there (which makes no completion) gives
// its timestamp to none.
func TestPollTimestamps(t *testing.T) {
	const raw = 0x6543_2100<<32 | 999_999_990 // a real-time CQE's seconds, nanoseconds
	for _, tc := range []struct {
		clock cqseam.Clock
		want  func(uint64) uint64
	}{
		{cqseam.NoTimestamps, func(uint64) uint64 { return 0 }},
		{cqseam.DeviceClock, func(v uint64) uint64 { return v }},
		{cqseam.WallClock, func(v uint64) uint64 { return v>>32*1_000_000_000 + v&0xffffffff }},
	} {
		t.Run(tc.clock.String(), func(t *testing.T) {
			c, _ := testCtx(t)
			testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
			q := testCQ(t, c, 16, 64)
			q.ts = tc.clock
			for round := range 2 { // batches with and without a CQE of a QP gone
				ci := q.ci
				writeCQE(q.buf, 16, 64, ci, cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND, qpn: 0x1234, uidx: testUIDX, ts: raw})
				writeCQE(q.buf, 16, 64, ci+1, cqeFields{opcode: uapi.MLX5_CQE_RESP_SEND, qpn: 0x1234, uidx: testUIDX, byteCnt: 8, ts: raw + 1})
				if round == 1 {
					writeCQE(q.buf, 16, 64, ci+1, cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND, qpn: 0x999, uidx: 0x999, ts: raw + 7})
					writeCQE(q.buf, 16, 64, ci+2, cqeFields{opcode: uapi.MLX5_CQE_RESP_SEND, qpn: 0x1234, uidx: testUIDX, byteCnt: 8, ts: raw + 1})
				}
				errAt := ci + 2 + uint32(round)
				writeCQE(q.buf, 16, 64, errAt, cqeFields{opcode: uapi.MLX5_CQE_REQ_ERR, qpn: 0x1234, uidx: testUIDX, counter: uint16(round + 1),
					syndrome: uapi.MLX5_CQE_SYNDROME_WR_FLUSH_ERR, vendor: 0xff})
				wcs := []cq.WC{{Timestamp: 1}, {Timestamp: 1}, {Timestamp: 1}, {Timestamp: 1}}
				if n := q.pollLocked(wcs); n != 3 {
					t.Fatalf("round %d: polled %d of 3", round, n)
				}
				for i, w := range wcs[:2] {
					if want := tc.want(raw + uint64(i)); w.Status != cq.Success || w.Timestamp != want {
						t.Errorf("round %d, completion %d: status %v, timestamp %#x, want %#x", round, i, w.Status, w.Timestamp, want)
					}
				}
				if w := wcs[2]; w.Status != cq.WRFlushErr || w.Timestamp != 0 {
					t.Errorf("round %d, error completion: status %v, timestamp %#x, want 0", round, w.Status, w.Timestamp)
				}
				if wcs[3].Timestamp != 1 {
					t.Errorf("round %d: a slot past the completions was written: %+v", round, wcs[3])
				}
			}
		})
	}
}

// TestCleanCQ: a reset QP's completions leave the ring; the others stay,
// in order, and poll as before.
func TestCleanCQ(t *testing.T) {
	c, _ := testCtx(t)
	a := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	b := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	b.key = 8
	c.setQP(testUIDX, a)
	c.setQP(8, b)
	for i := range a.sq.wrid {
		a.sq.wrid[i], b.sq.wrid[i] = 100+uint64(i), 200+uint64(i)
		a.sq.wqeHead[i], b.sq.wqeHead[i] = uint32(i), uint32(i)
	}
	for _, size := range []uint32{64, 128} {
		q := testCQ(t, c, 8, size)
		// Start mid-ring so the survivors cross the wrap.
		q.ci = 13
		keys := []uint32{testUIDX, 8, testUIDX, testUIDX, 8, 8, testUIDX}
		for k, key := range keys {
			writeCQE(q.buf, 8, size, q.ci+uint32(k), cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND, uidx: key, counter: uint16(k)})
		}
		a.CleanCQ(q)
		if q.ci != 13+4 {
			t.Errorf("%d-byte CQEs: consumer index %d after freeing 4, want 17", size, q.ci)
		}
		wcs := make([]cq.WC, 8)
		n := q.pollLocked(wcs)
		var got []uint64
		for _, w := range wcs[:n] {
			got = append(got, w.WRID)
		}
		if d := cmp.Diff([]uint64{201, 204, 205}, got); d != "" {
			t.Errorf("%d-byte CQEs: after clean (-want +got):\n%s", size, d)
		}
	}
}

// sendCQE is a requester CQE of the test QP for its send WQE number pi,
// whose wr_id the test has set to wrid.
func sendCQE(qp *queuePair, pi uint32, wrid uint64) cqeFields {
	idx := pi & (qp.sq.wqeCnt - 1)
	qp.sq.wrid[idx], qp.sq.wqeHead[idx] = wrid, pi
	return cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND, qpn: 0x1234, uidx: testUIDX, counter: uint16(idx)}
}

// PollRing follows cqseam.RingLock's protocol: an empty ring is answered
// without the lock (here held by the test, as a Close would), a ring with
// completions only under it, and the error word wins over both. The
// consumer index it looks at follows Poll across the owner bit's passes.
func TestPollRing(t *testing.T) {
	c, _ := testCtx(t)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	for _, size := range []uint32{64, 128} {
		q := testCQ(t, c, 8, size)
		var l cqseam.RingLock
		wcs := make([]cq.WC, 3)
		if n, err := pollHeld(t, q, wcs, &l); n != 0 || err != nil {
			t.Fatalf("%d-byte CQEs: empty ring: %d, %v", size, n, err)
		}
		l.Lock()
		writeCQE(q.buf, 8, size, 0, sendCQE(qp, 0, 100))
		done := make(chan int)
		go func() { n, _ := q.PollRing(wcs, &l); done <- n }()
		select {
		case n := <-done:
			t.Fatalf("%d-byte CQEs: PollRing consumed %d completions without the lock", size, n)
		case <-time.After(20 * time.Millisecond):
		}
		l.Unlock()
		if n := <-done; n != 1 || wcs[0].WRID != 100 || wcs[0].QPNum != 0x1234 {
			t.Fatalf("%d-byte CQEs: PollRing = %d, %+v", size, n, wcs[0])
		}
		// Pass after pass, in batches of 3: every CQE comes once, in order,
		// and a drained ring is empty to a PollRing that cannot lock.
		pi, got := uint32(1), uint64(1)
		for pass := 0; pass < 5; pass++ {
			for k := 0; k < 7; k++ {
				writeCQE(q.buf, 8, size, pi, sendCQE(qp, pi, 100+uint64(pi)))
				pi++
			}
			for {
				n, err := q.PollRing(wcs, &l)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				for _, w := range wcs[:n] {
					if w.WRID != 100+got {
						t.Fatalf("%d-byte CQEs, pass %d: wr_id %d, want %d", size, pass, w.WRID, 100+got)
					}
					got++
				}
			}
			if got != uint64(pi) {
				t.Fatalf("%d-byte CQEs, pass %d: polled up to %d, want %d", size, pass, got, pi)
			}
			if n, err := pollHeld(t, q, wcs, &l); n != 0 || err != nil {
				t.Fatalf("%d-byte CQEs, pass %d: drained ring: %d, %v", size, pass, n, err)
			}
		}
		broken := errors.New("overrun")
		l.Fail(broken)
		if _, err := q.PollRing(wcs, &l); err != broken {
			t.Errorf("%d-byte CQEs: PollRing of a failed, empty CQ: %v", size, err)
		}
		writeCQE(q.buf, 8, size, pi, sendCQE(qp, pi, 1))
		if n, err := q.PollRing(wcs, &l); n != 0 || err != broken {
			t.Errorf("%d-byte CQEs: PollRing of a failed CQ with a completion: %d, %v", size, n, err)
		}
	}
}

// pollHeld calls PollRing while the test holds l, as a Close or Resize
// would: an empty ring must be answered without the lock, or the test
// fails.
func pollHeld(t *testing.T, q *completionQueue, wcs []cq.WC, l *cqseam.RingLock) (int, error) {
	t.Helper()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	l.Lock()
	defer l.Unlock()
	go func() { n, err := q.PollRing(wcs, l); done <- result{n, err} }()
	select {
	case r := <-done:
		return r.n, r.err
	case <-time.After(5 * time.Second):
		t.Fatal("PollRing waits for the lock")
		return 0, nil
	}
}

// A ring given back (Release, as Destroy does) while a lock-free PollRing
// may read it is replaced by a read-only placeholder, and unmapped only
// once the ring is unreachable. PollRing and Poll after Release find the
// CQ empty.
func TestPollRingReleased(t *testing.T) {
	c, _ := testCtx(t)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	q := testCQ(t, c, 64, 64)
	for pi := uint32(0); pi < 3; pi++ {
		writeCQE(q.buf, 64, 64, pi, sendCQE(qp, pi, uint64(pi)))
	}
	addr := uintptr(q.buf.ptr())
	size := q.Size()
	r := q.live.Load()
	if !r.ready() {
		t.Fatal("a ring with 3 completions is not ready")
	}
	var l cqseam.RingLock
	q.Release()
	// What a PollRing that loaded the ring before Release reads now: the
	// placeholder's zeros, and no fault.
	if oo := opOwnWord((*uint32)(unsafe.Add(r.at(0), cqeWQECounter))); oo != 0 {
		t.Errorf("retired ring: op_own %#x, want the placeholder's 0", oo)
	}
	r.ready() // no fault
	if n, err := q.PollRing(make([]cq.WC, 4), &l); n != 0 || err != nil {
		t.Errorf("PollRing after Release = %d, %v", n, err)
	}
	if n := q.pollLocked(make([]cq.WC, 4)); n != 0 {
		t.Errorf("Poll after Release = %d", n)
	}
	if q.Size() != size {
		t.Errorf("Size after Release = %d, want %d", q.Size(), size)
	}
	if perm := mapping(t, addr); perm != "r--p" {
		t.Fatalf("the placeholder at %#x: %q, want a read-only mapping", addr, perm)
	}
	runtime.KeepAlive(r)
	r = nil
	deadline := time.Now().Add(10 * time.Second)
	for mapping(t, addr) == "r--p" { // gone, or the address reused for something else
		if time.Now().After(deadline) {
			t.Fatalf("the placeholder at %#x is still mapped 10 s after its ring became unreachable", addr)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// A resize moves what the old ring holds to the new one (the test plays
// the device's part: the resize CQE, then Resize's own moveTo): PollRing
// finds those completions in the new ring, in order, then the device's
// next ones there; the old ring is retired.
func TestPollRingResize(t *testing.T) {
	c, _ := testCtx(t)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	for _, size := range []uint32{64, 128} {
		q := testCQ(t, c, 8, size)
		var l cqseam.RingLock
		wcs := make([]cq.WC, 8)
		// Start on the second pass, mid-ring, so the copies cross the wrap.
		q.ci = 13
		q.setCI()
		pi := q.ci
		for k := 0; k < 5; k++ {
			writeCQE(q.buf, 8, size, pi, sendCQE(qp, pi, uint64(pi)))
			pi++
		}
		addr := uintptr(q.buf.ptr())
		old := q.live.Load()
		writeCQE(q.buf, 8, size, pi, cqeFields{opcode: uapi.MLX5_CQE_RESIZE_CQ})
		pi++
		fresh, err := newRing(32, size)
		if err != nil {
			t.Fatal(err)
		}
		l.Lock() // as cq.CQ.Resize holds it
		if err := q.moveTo(fresh); err != nil {
			t.Fatal(err)
		}
		// With the lock still held: the new ring is not empty.
		done := make(chan int)
		go func() { n, _ := q.PollRing(wcs[:2], &l); done <- n }()
		select {
		case n := <-done:
			t.Fatalf("%d-byte CQEs: PollRing consumed %d completions of the new ring without the lock", size, n)
		case <-time.After(20 * time.Millisecond):
		}
		l.Unlock()
		if n := <-done; n != 2 || wcs[0].WRID != 13 || wcs[1].WRID != 14 {
			t.Fatalf("%d-byte CQEs: first PollRing after the resize = %d, %+v", size, n, wcs[:n])
		}
		if q.live.Load() != fresh || q.Size() != 31 {
			t.Fatalf("%d-byte CQEs: after moveTo, the live ring is not the new one (size %d)", size, q.Size())
		}
		if perm := mapping(t, addr); perm != "r--p" {
			t.Errorf("%d-byte CQEs: the old ring at %#x: %q, want the read-only placeholder", size, addr, perm)
		}
		// What a PollRing that loaded the old ring before the resize reads
		// now: the placeholder's zeros, and no fault.
		if oo := opOwnWord((*uint32)(unsafe.Add(old.at(old.ci.Load()), cqeWQECounter))); oo != 0 {
			t.Errorf("%d-byte CQEs: retired ring: op_own %#x, want the placeholder's 0", size, oo)
		}
		// The device goes on in the new ring, after the resize CQE's index.
		for k := 0; k < 3; k++ {
			writeCQE(q.buf, 32, size, pi, sendCQE(qp, pi, uint64(pi)))
			pi++
		}
		want := []uint64{15, 16, 17, 19, 20, 21} // 18 is the resize CQE
		var got []uint64
		for {
			n, err := q.PollRing(wcs, &l)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			for _, w := range wcs[:n] {
				got = append(got, w.WRID)
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%d-byte CQEs: after the resize (-want +got):\n%s", size, d)
		}
		if ci := dbWord(q.db, 0); ci != pi {
			t.Errorf("%d-byte CQEs: doorbell record consumer index %d, want %d", size, ci, pi)
		}
		if n, err := pollHeld(t, q, wcs, &l); n != 0 || err != nil {
			t.Errorf("%d-byte CQEs: drained new ring: %d, %v", size, n, err)
		}
	}
}

// mapping returns the permissions of the mapping that holds addr, or ""
// if none does. (The kernel may merge a placeholder with a neighbour.)
func mapping(t *testing.T, addr uintptr) string {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(maps), "\n") {
		var lo, hi uintptr
		var perm string
		if _, err := fmt.Sscanf(l, "%x-%x %s", &lo, &hi, &perm); err == nil && lo <= addr && addr < hi {
			return perm
		}
	}
	return ""
}

// A device that wrote no resize CQE still writes to the new ring once the
// kernel took the resize: moveTo moves to it all the same (as rdma-core
// does), retires the old ring, and reports the loss with EIO; the new ring
// must not be freed under the device.
func TestResizeWithoutResizeCQE(t *testing.T) {
	c, _ := testCtx(t)
	qp := testQP(t, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1})
	q := testCQ(t, c, 8, 64)
	writeCQE(q.buf, 8, 64, q.ci, sendCQE(qp, q.ci, 1)) // a completion, and no marker after it
	addr := uintptr(q.buf.ptr())
	fresh, err := newRing(32, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.moveTo(fresh); !errors.Is(err, unix.EIO) {
		t.Fatalf("moveTo without a resize CQE: %v, want EIO", err)
	}
	if q.live.Load() != fresh || q.Size() != 31 {
		t.Fatalf("after the failed copy the live ring is not the new one (size %d)", q.Size())
	}
	if perm := mapping(t, addr); perm != "r--p" {
		t.Errorf("the old ring at %#x: %q, want the read-only placeholder", addr, perm)
	}
	var l cqseam.RingLock
	if n, err := q.PollRing(make([]cq.WC, 4), &l); n != 0 || err != nil {
		t.Errorf("PollRing on the new, empty ring: %d, %v", n, err)
	}
}

// TestPostSendPlainPath holds writeWQE's plain requests (no call to
// provider.CheckSend) to the checked ones: for every opcode it takes, on
// RC and UC, the WQE written and the doorbell rung are the same when the
// QP is made to check every request; and requests it must not take are
// refused with nothing published.
func TestPostSendPlainPath(t *testing.T) {
	cp := kverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 60}
	sgl := []provider.SGE{{Addr: 0x1000, Length: 100, LKey: 7}, {Addr: 0x9000, Length: 28, LKey: 8}}
	for _, typ := range []uint8{uapi.IB_UVERBS_QPT_RC, uapi.IB_UVERBS_QPT_UC} {
		for op := uint32(0); op < 32; op++ {
			if provider.PlainSendOps(typ)>>op&1 == 0 {
				continue
			}
			c, _ := testCtx(t)
			plain, checked := testQP(t, c, typ, cp), testQP(t, c, typ, cp)
			checked.plainOps = 0
			wr := provider.SendWR{WRID: 42, Opcode: op, Flags: provider.SendSignaled, SGL: sgl,
				Imm: 0x01020304, RemoteAddr: 0xabcd000, RKey: 99}
			for _, q := range []*queuePair{plain, checked} {
				if n, err := q.PostSend([]provider.SendWR{wr}); n != 1 || err != nil {
					t.Fatalf("type %d opcode %d: PostSend = %d, %v", typ, op, n, err)
				}
			}
			if !bytes.Equal(plain.sq.mem[:sendWQEBB*2], checked.sq.mem[:sendWQEBB*2]) {
				t.Errorf("type %d opcode %d: plain path's WQE\n%x\nchecked path's\n%x", typ, op, plain.sq.mem[:sendWQEBB*2], checked.sq.mem[:sendWQEBB*2])
			}
			if a, b := dbWord(plain.db, 4), dbWord(checked.db, 4); a != b || a == 0 {
				t.Errorf("type %d opcode %d: doorbell records %d and %d", typ, op, a, b)
			}
		}
	}
	big := []provider.SGE{{Length: provider.MaxSendLength}, {Length: 1}}
	for _, tc := range []struct {
		name string
		typ  uint8
		wr   provider.SendWR
		want error
	}{
		{"over 2 GiB", uapi.IB_UVERBS_QPT_RC, provider.SendWR{Opcode: provider.WRSend, SGL: big}, unix.EINVAL},
		{"more SGEs than the cap", uapi.IB_UVERBS_QPT_RC, provider.SendWR{Opcode: provider.WRSend}, unix.EINVAL}, // SGL set below
		{"read on UC", uapi.IB_UVERBS_QPT_UC, provider.SendWR{Opcode: provider.WRRDMARead, SGL: sgl[:1]}, unix.EINVAL},
		{"opcode 33", uapi.IB_UVERBS_QPT_RC, provider.SendWR{Opcode: 33, SGL: sgl[:1]}, unix.EOPNOTSUPP},
		{"UD without an AH", uapi.IB_UVERBS_QPT_UD, provider.SendWR{Opcode: provider.WRSend, SGL: sgl[:1]}, unix.EINVAL},
	} {
		c, _ := testCtx(t)
		q := testQP(t, c, tc.typ, cp)
		if tc.wr.SGL == nil {
			tc.wr.SGL = make([]provider.SGE, q.cap.MaxSendSGE+1)
		}
		if n, err := q.PostSend([]provider.SendWR{tc.wr}); n != 0 || !errors.Is(err, tc.want) {
			t.Errorf("%s: PostSend = %d, %v; want 0 and %v", tc.name, n, err, tc.want)
		}
		if q.sq.head != 0 || q.sq.curPost != 0 || dbWord(q.db, 4) != 0 {
			t.Errorf("%s: published (head %d, index %d, doorbell record %d)", tc.name, q.sq.head, q.sq.curPost, dbWord(q.db, 4))
		}
	}
}
