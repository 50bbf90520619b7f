package mlx5

import (
	"fmt"
	"github.com/goverbs/goverbs/internal/cqseam"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uapi"
)

// Benchmarks of the mlx5 hot paths on the host, with the test playing the
// device (no ConnectX here): what the provider itself costs per CQE and
// per WQE, the figures [F] compares. The device's side of each step (a
// CQE written, a WQE consumed) is outside the timer where it can be.

func benchRig(b *testing.B) (*context, *completionQueue, *queuePair) {
	c, _ := testCtx(b)
	q := testCQ(b, c, 1024, 64)
	qp := testQP(b, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 1024, MaxRecvWR: 1024, MaxSendSGE: 1, MaxRecvSGE: 1})
	return c, q, qp
}

// BenchmarkMlx5PollEmpty is the provider's Poll of an empty CQ, with no
// lock: what the two benchmarks below wrap.
func BenchmarkMlx5PollEmpty(b *testing.B) {
	_, q, _ := benchRig(b)
	wcs := make([]cq.WC, 16)
	b.ReportAllocs()
	for b.Loop() {
		q.pollLocked(wcs)
	}
}

// BenchmarkMlx5PollRingEmpty is cq.CQ.Poll of an empty mlx5 CQ as it is
// now: PollRing, which looks at the CQE at the consumer index and takes
// no lock.
func BenchmarkMlx5PollRingEmpty(b *testing.B) {
	_, q, _ := benchRig(b)
	var l cqseam.RingLock
	wcs := make([]cq.WC, 16)
	b.ReportAllocs()
	for b.Loop() {
		q.PollRing(wcs, &l)
	}
}

// BenchmarkMlx5PollLockedEmpty polls an empty CQ under the CQ's lock:
// the lock, its error word, the poll, unlock; what PollRing's look
// without the lock saves.
func BenchmarkMlx5PollLockedEmpty(b *testing.B) {
	_, q, _ := benchRig(b)
	var l cqseam.RingLock
	wcs := make([]cq.WC, 16)
	b.ReportAllocs()
	for b.Loop() {
		l.Lock()
		if e := l.Err(); e == nil {
			q.pollLocked(wcs)
		}
		l.Unlock()
	}
}

// BenchmarkMlx5PollCQE drains a full CQ (1024 CQEs, written by the test
// as the device would) in batches of 1, 16 and 64: ns/CQE is the drains'
// time alone. Each round fills the ring, then times its drain itself:
// stopping the benchmark timer for each fill would, with -benchmem, read
// the memory statistics, which stops the world, around every drain.
func BenchmarkMlx5PollCQE(b *testing.B) {
	for _, batch := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			_, q, _ := benchRig(b)
			drainBench(b, q, batch, q.pollLocked)
		})
	}
}

// BenchmarkMlx5PollRingCQE is BenchmarkMlx5PollCQE through PollRing, as
// cq.CQ.Poll runs it: the look, then the lock around the consume.
func BenchmarkMlx5PollRingCQE(b *testing.B) {
	for _, batch := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			_, q, _ := benchRig(b)
			var l cqseam.RingLock
			drainBench(b, q, batch, func(wcs []cq.WC) int {
				n, _ := q.PollRing(wcs, &l)
				return n
			})
		})
	}
}

// BenchmarkMlx5PollRecvCQE is BenchmarkMlx5PollCQE with receive
// completions (a send received, with its byte count): the other half of
// every exchange, decoded out of line (decodeCQE).
func BenchmarkMlx5PollRecvCQE(b *testing.B) {
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			_, q, _ := benchRig(b)
			drainBenchOf(b, q, batch, q.pollLocked, func(i uint32) cqeFields {
				return cqeFields{opcode: uapi.MLX5_CQE_RESP_SEND, qpn: 0x1234, uidx: testUIDX, counter: uint16(i), byteCnt: 64}
			})
		})
	}
}

// drainBench fills q's ring with send completions of one QP and drains it
// with poll in batches, once per iteration, timing the drains only.
func drainBench(b *testing.B, q *completionQueue, batch int, poll func([]cq.WC) int) {
	drainBenchOf(b, q, batch, poll, func(i uint32) cqeFields {
		return cqeFields{opcode: uapi.MLX5_CQE_REQ, wqeOp: uapi.MLX5_OPCODE_SEND, qpn: 0x1234, uidx: testUIDX, counter: uint16(i)}
	})
}

// drainBenchOf is drainBench with the CQEs that fields(i) describes.
func drainBenchOf(b *testing.B, q *completionQueue, batch int, poll func([]cq.WC) int, fields func(i uint32) cqeFields) {
	wcs := make([]cq.WC, batch)
	b.ReportAllocs()
	var took time.Duration
	cqes := 0
	for b.Loop() {
		for i := uint32(0); i < q.ncqe; i++ {
			writeCQE(q.buf, q.ncqe, 64, q.ci+i, fields(i))
		}
		start := time.Now()
		for left := int(q.ncqe); left > 0; {
			left -= poll(wcs[:min(batch, left)])
		}
		took += time.Since(start)
		cqes += int(q.ncqe)
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(cqes), "ns/CQE")
}

func BenchmarkMlx5ReqNotify(b *testing.B) {
	_, q, _ := benchRig(b)
	b.ReportAllocs()
	for b.Loop() {
		q.ReqNotify(false)
	}
}

// BenchmarkMlx5PostSend posts one signaled send per op and rings the
// doorbell; the device "consumes" it at once.
func BenchmarkMlx5PostSend(b *testing.B) {
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			_, _, qp := benchRig(b)
			wrs := make([]provider.SendWR, batch)
			for i := range wrs {
				wrs[i] = provider.SendWR{WRID: uint64(i), Opcode: provider.WRSend, Flags: provider.SendSignaled,
					SGL: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}
			}
			postBench(b, qp, wrs)
		})
	}
}

func BenchmarkMlx5PostRecv(b *testing.B) {
	_, _, qp := benchRig(b)
	wrs := []provider.RecvWR{{SGL: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}}
	b.ReportAllocs()
	for b.Loop() {
		qp.PostRecv(wrs)
		qp.rq.tail.Store(qp.rq.head)
	}
}

// BenchmarkMlx5PostSRQRecv posts one receive to an SRQ, then gives its
// WQE back as a completion would: the free list's lock, its walk and the
// doorbell record, to compare with BenchmarkMlx5PostRecv's ring.
func BenchmarkMlx5PostSRQRecv(b *testing.B) {
	c, _, _ := benchRig(b)
	s, err := c.newSRQ(1024, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Release)
	wrs := []provider.RecvWR{{SGL: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}}
	b.ReportAllocs()
	for b.Loop() {
		i := s.head
		s.PostRecv(wrs)
		s.complete(uint16(i))
	}
}

// BenchmarkMlx5PostSendInline posts signaled sends whose payload is
// copied into the WQE (SendInline, as perftest's latency tools post small
// messages), one per doorbell and sixteen per doorbell.
func BenchmarkMlx5PostSendInline(b *testing.B) {
	for _, size := range []int{8, 64, 200} {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("size=%d/batch=%d", size, batch), func(b *testing.B) {
				c, _ := testCtx(b)
				qp := testQP(b, c, uapi.IB_UVERBS_QPT_RC, kverbs.QPCap{MaxSendWR: 1024, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 256})
				payload, err := allocDMA(4096) // outside the Go heap, as a registered buffer
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(payload.free)
				addr := uint64(uintptr(payload.ptr()))
				wrs := make([]provider.SendWR, batch)
				for i := range wrs {
					wrs[i] = provider.SendWR{WRID: uint64(i), Opcode: provider.WRSend, Flags: provider.SendSignaled | provider.SendInline,
						SGL: []provider.SGE{{Addr: addr, Length: uint32(size), LKey: 1}}}
				}
				postBench(b, qp, wrs)
			})
		}
	}
}

// BenchmarkMlx5PostSendUD posts signaled UD sends of one SGE, each with
// its address vector, one per doorbell and sixteen per doorbell.
func BenchmarkMlx5PostSendUD(b *testing.B) {
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			c, _ := testCtx(b)
			qp := testQP(b, c, uapi.IB_UVERBS_QPT_UD, kverbs.QPCap{MaxSendWR: 1024, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1})
			ah := &provider.AHRef{AH: &addressHandle{}}
			wrs := make([]provider.SendWR, batch)
			for i := range wrs {
				wrs[i] = provider.SendWR{WRID: uint64(i), Opcode: provider.WRSend, Flags: provider.SendSignaled,
					SGL: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}, AH: ah, RemoteQPN: 0x42, RemoteQKey: 0x11111111}
			}
			postBench(b, qp, wrs)
		})
	}
}

// BenchmarkMlx5PostSendAtomic posts signaled atomics, compare-and-swap
// and fetch-and-add in turn, one per doorbell and sixteen per doorbell.
func BenchmarkMlx5PostSendAtomic(b *testing.B) {
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			_, _, qp := benchRig(b)
			wrs := make([]provider.SendWR, batch)
			for i := range wrs {
				wrs[i] = provider.SendWR{WRID: uint64(i), Opcode: provider.WRAtomicCmpSwp + uint32(i%2), Flags: provider.SendSignaled,
					SGL: []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}, RemoteAddr: 0x2000, RKey: 2, CompareAdd: 3, Swap: 4}
			}
			postBench(b, qp, wrs)
		})
	}
}

// postBench posts wrs, one doorbell for them all, until b.N requests are
// posted; the device "consumes" each batch at once.
func postBench(b *testing.B, qp *queuePair, wrs []provider.SendWR) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(wrs) {
		if _, err := qp.PostSend(wrs); err != nil {
			b.Fatal(err)
		}
		qp.sq.tail.Store(qp.sq.head)
	}
}
