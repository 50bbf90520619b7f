package mlx5

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/testutil/sendfuzz"
	"github.com/goverbs/goverbs/uapi"
)

// TestPostSendPlainRuns holds PostSend's loop for plain requests
// (postPlain) to postOneSend's checked path, request by request: random
// batches mixing plain requests with inline, atomic, refused, empty-SGE,
// over-long and queue-full ones, posted to a QP as it is and to one made
// to check every request, must leave the same bytes in both rings, the same
// doorbell record and blue-flame word, the same queue state, and return
// the same counts and errors. The rings are small and the SGEs up to four,
// so WQEs that would pass the ring's end (which only postOneSend writes)
// come up often.
func TestPostSendPlainRuns(t *testing.T) {
	// The inline payloads: memory outside the Go heap, as a registered
	// buffer would be (an SGE holds its address as a number, which keeps
	// nothing alive, and a Go stack may move).
	payload, err := allocDMA(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer payload.free()
	for i := range payload {
		payload[i] = byte(i)
	}
	base := uint64(uintptr(payload.ptr()))
	ops := []uint32{provider.WRSend, provider.WRSendWithImm, provider.WRRDMAWrite, provider.WRRDMAWriteWithImm,
		provider.WRRDMARead, provider.WRSendWithInv, provider.WRAtomicCmpSwp, provider.WRAtomicFetchAdd, 33}
	cp := kverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 4, MaxSendSGE: 4, MaxRecvSGE: 1, MaxInlineData: 60}
	ahs := []*provider.AHRef{nil, {AH: otherAH{}}}
	for range 3 {
		ah := &addressHandle{}
		for i := range ah.av {
			ah.av[i] = byte(rand.Uint32())
		}
		ahs = append(ahs, &provider.AHRef{AH: ah})
	}
	for _, typ := range []uint8{uapi.IB_UVERBS_QPT_RC, uapi.IB_UVERBS_QPT_UC, uapi.IB_UVERBS_QPT_UD} {
		for _, sigAll := range []bool{false, true} {
			name := fmt.Sprintf("type %d sigAll %v", typ, sigAll)
			p := newPostPair(t, typ, sigAll, cp)
			fast := p.fast
			rng := rand.New(rand.NewPCG(uint64(typ), 1))
			plain, atomics := 0, 0
			for round := range 2000 {
				wrs := make([]provider.SendWR, 1+rng.IntN(5))
				for i := range wrs {
					wr := &wrs[i]
					wr.WRID = rng.Uint64()
					wr.Opcode = ops[rng.IntN(len(ops))]
					wr.Flags = uint32(rng.IntN(8))
					wr.Imm, wr.RemoteAddr, wr.RKey = rng.Uint32(), rng.Uint64(), rng.Uint32()
					wr.CompareAdd, wr.Swap = rng.Uint64(), rng.Uint64()
					wr.AH, wr.RemoteQPN, wr.RemoteQKey = ahs[rng.IntN(len(ahs))], rng.Uint32(), rng.Uint32()
					if typ == uapi.IB_UVERBS_QPT_UD && rng.IntN(5) != 0 { // mostly what UD takes
						wr.Opcode = []uint32{provider.WRSend, provider.WRSendWithImm}[rng.IntN(2)]
						wr.AH = ahs[2+rng.IntN(len(ahs)-2)]
					}
					wr.SGL = make([]provider.SGE, rng.IntN(6)) // five: more than the QP takes
					for k := range wr.SGL {
						wr.SGL[k] = provider.SGE{Addr: base + uint64(rng.IntN(64)), Length: uint32(rng.IntN(40)), LKey: rng.Uint32()}
						switch rng.IntN(8) {
						case 0:
							wr.SGL[k].Length = 0
						case 1:
							wr.SGL[k].Length = 1 << 31 // two make a request over the limit
						}
					}
					if rng.IntN(6) == 0 {
						wr.Flags |= provider.SendInline
						for k := range wr.SGL {
							wr.SGL[k].Length %= 16
						}
					}
					if (wr.Opcode == provider.WRAtomicCmpSwp || wr.Opcode == provider.WRAtomicFetchAdd) && rng.IntN(4) != 0 {
						// Mostly what an atomic takes: 8 bytes or more, at an
						// aligned remote address, not inline.
						wr.SGL = []provider.SGE{{Addr: base + uint64(rng.IntN(8)), Length: 8 + uint32(rng.IntN(3)), LKey: rng.Uint32()}}
						switch rng.IntN(6) {
						case 0, 1:
							wr.SGL = append(wr.SGL, provider.SGE{Addr: base, Length: uint32(rng.IntN(3)) << 30, LKey: rng.Uint32()})
						case 2: // the most one request carries, and more
							wr.SGL[0].Length = provider.MaxSendLength - 1 + uint32(rng.IntN(3))
						}
						wr.RemoteAddr &^= 7
						if rng.IntN(8) != 0 {
							wr.Flags &^= provider.SendInline
						}
					}
					if fast.fastOps>>wr.Opcode&1 != 0 && len(wr.SGL) <= 4 {
						plain++
					}
				}
				n := p.post(t, fmt.Sprintf("%s round %d", name, round), wrs)
				for _, wr := range wrs[:n] {
					if wr.Opcode == provider.WRAtomicCmpSwp || wr.Opcode == provider.WRAtomicFetchAdd {
						atomics++
					}
				}
				if rng.IntN(3) == 0 {
					p.consume()
				}
			}
			if fast.sq.head < 1000 || plain < 2000 || typ == uapi.IB_UVERBS_QPT_RC && atomics < 200 {
				t.Errorf("%s: %d WQEs posted (%d atomics), %d plain requests offered: the mix does not exercise the paths", name, fast.sq.head, atomics, plain)
			}
		}
	}
}

// postPair is two QPs of one type for the differential post tests: fast
// as PostSend posts, checked made to take postOneSend's checked path for
// every request.
type postPair struct{ fast, checked *queuePair }

// newPostPair makes a postPair of type typ, signaling every request or not.
func newPostPair(t testing.TB, typ uint8, sigAll bool, cp kverbs.QPCap) postPair {
	c, _ := testCtx(t)
	p := postPair{testQP(t, c, typ, cp), testQP(t, c, typ, cp)}
	p.checked.plainOps, p.checked.fastOps, p.checked.atomics = 0, 0, 0
	for _, q := range []*queuePair{p.fast, p.checked} {
		q.sigAll = sigAll
		if sigAll {
			q.sigFlag = ctrlCQUpdate
		}
	}
	return p
}

// post posts wrs to both QPs and fails t (naming the post what) unless
// both return the same count and error (sendfuzz.SameRefusal), publish the same
// WQEs byte for byte (each as far as its ctrl segment's size says: the
// device reads no more; both paths leave bytes in slots they do not
// publish when they refuse a request), whose sizes add up to how far the
// queue moved, and end with the same doorbell record, blue-flame word and
// queue state. It returns how many were posted.
func (p postPair) post(t testing.TB, what string, wrs []provider.SendWR) int {
	t.Helper()
	fast, checked := p.fast, p.checked
	start := fast.sq.curPost
	n1, err1 := fast.PostSend(wrs)
	n2, err2 := checked.PostSend(wrs)
	if n1 != n2 || !sendfuzz.SameRefusal(err1, err2) {
		t.Fatalf("%s: PostSend = %d, %v; checked %d, %v\n%+v", what, n1, err1, n2, err2, wrs)
	}
	at := start
	for int32(fast.sq.curPost-at) > 0 {
		a, b := wqeBytes(fast, at), wqeBytes(checked, at)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: the WQE at %d\n%x\nchecked\n%x\n%+v", what, at, a, b, wrs)
		}
		at += uint32(max(len(a), 1)+sendWQEBB-1) / sendWQEBB
	}
	if at != fast.sq.curPost {
		t.Fatalf("%s: the WQEs' sizes take the queue from %d to %d, not to %d", what, start, at, fast.sq.curPost)
	}
	if a, b := dbWord(fast.db, dbrecSend), dbWord(checked.db, dbrecSend); a != b {
		t.Fatalf("%s: doorbell records %d, checked %d", what, a, b)
	}
	if a, b := *(*uint64)(fast.bf), *(*uint64)(checked.bf); a != b {
		t.Fatalf("%s: blue-flame words %#x, checked %#x", what, a, b)
	}
	type state struct {
		CurPost, Head uint32
		WRID          []uint64
		WQEHead       []uint32
	}
	s1 := state{fast.sq.curPost, fast.sq.head, fast.sq.wrid, fast.sq.wqeHead}
	s2 := state{checked.sq.curPost, checked.sq.head, checked.sq.wrid, checked.sq.wqeHead}
	if d := cmp.Diff(s2, s1); d != "" {
		t.Fatalf("%s: queue state (-checked +fast):\n%s", what, d)
	}
	return n1
}

// consume plays the device being done with everything posted to both.
func (p postPair) consume() {
	p.fast.sq.tail.Store(p.fast.sq.head)
	p.checked.sq.tail.Store(p.checked.sq.head)
}

// otherAH is an address handle of another provider.
type otherAH struct{}

func (otherAH) Handle() uint32 { return 0 }
func (otherAH) Destroy() error { return nil }

// wqeBytes returns a copy of the send WQE at basic block index at, as many
// 16-byte segments as its ctrl segment says, across the ring's end.
func wqeBytes(q *queuePair, at uint32) []byte {
	ring := q.sq.mem
	off := int(at&(q.sq.wqeCnt-1)) * sendWQEBB
	ds := int(ring[off+ctrlQPNDS+3] & 0x3f)
	b := make([]byte, 0, ds*segSize)
	for i := range ds * segSize {
		b = append(b, ring[(off+i)%len(ring)])
	}
	return b
}
