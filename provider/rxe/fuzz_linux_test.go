package rxe

import (
	"bytes"
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/testutil/sendfuzz"
	"github.com/goverbs/goverbs/uapi"
)

// The fuzz targets of the rxe data path: the CQE decoder on every byte of
// a struct ib_uverbs_wc, Poll over a ring whose header, indices and slots
// are all fuzz input, and PostSend's plain path against its checked one on
// fuzzed requests. mlx5's targets live beside it, in provider/mlx5.

const wcSize = int(unsafe.Sizeof(uapi.IBUverbsWC{})) // 48

// refWC decodes a struct ib_uverbs_wc from its bytes at the offsets the C
// compiler gave (pinned by uapi's layout test), without the Go struct:
// what convertWC must agree with.
func refWC(b []byte) cq.WC {
	var k uapi.IBUverbsWC
	ne := binary.NativeEndian
	u32 := func(off uintptr) uint32 { return ne.Uint32(b[off:]) }
	u16 := func(off uintptr) uint16 { return ne.Uint16(b[off:]) }
	wrid := ne.Uint64(b[unsafe.Offsetof(k.WRID):])
	status := u32(unsafe.Offsetof(k.Status))
	if status != 0 {
		// ibv_poll_cq(3): on error, only wr_id, status, qp_num and
		// vendor_err are valid.
		return cq.WC{WRID: wrid, Status: cq.Status(status), VendorErr: u32(unsafe.Offsetof(k.VendorErr)),
			QPNum: u32(unsafe.Offsetof(k.QPNum))}
	}
	w := cq.WC{
		WRID:         wrid,
		Opcode:       cq.Opcode(u32(unsafe.Offsetof(k.Opcode))),
		VendorErr:    u32(unsafe.Offsetof(k.VendorErr)),
		ByteLen:      u32(unsafe.Offsetof(k.ByteLen)),
		QPNum:        u32(unsafe.Offsetof(k.QPNum)),
		SrcQP:        u32(unsafe.Offsetof(k.SrcQP)),
		PKeyIndex:    u16(unsafe.Offsetof(k.PkeyIndex)),
		SLID:         u16(unsafe.Offsetof(k.Slid)),
		SL:           b[unsafe.Offsetof(k.Sl)],
		DLIDPathBits: b[unsafe.Offsetof(k.DlidPathBits)],
	}
	// enum ib_wc_flags: GRH 1, WITH_IMM 2, WITH_INVALIDATE 4, IP_CSUM_OK 8.
	// imm_data and invalidate_rkey share one word, so a completion cannot
	// carry both: immediate data wins.
	fl := u32(unsafe.Offsetof(k.WCFlags))
	ex := b[unsafe.Offsetof(k.Ex):][:4]
	if fl&1 != 0 {
		w.Flags |= cq.WithGRH
	}
	if fl&8 != 0 {
		w.Flags |= cq.IPCsumOK
	}
	switch {
	case fl&2 != 0:
		w.Flags |= cq.WithImm
		w.Imm = uint32(ex[0])<<24 | uint32(ex[1])<<16 | uint32(ex[2])<<8 | uint32(ex[3]) // __be32, as sent
	case fl&4 != 0:
		w.Flags |= cq.WithInv
		w.Imm = ne.Uint32(ex) // a host-order rkey
	default:
		w.Imm = ne.Uint32(ex) // the word as the kernel left it: rxe clears it
	}
	return w
}

// wcBytes encodes k as the kernel lays it out.
func wcBytes(k uapi.IBUverbsWC) []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&k)), wcSize)...)
}

// FuzzWC decodes every 48-byte ib_uverbs_wc and checks each field of the
// result against refWC: the error zeroing, the exact flag translation and
// the byte order of the immediate data.
func FuzzWC(f *testing.F) {
	var be [4]byte
	binary.BigEndian.PutUint32(be[:], 0xdeadbeef)
	f.Add(wcBytes(uapi.IBUverbsWC{WRID: 1, Opcode: 128, ByteLen: 140, Ex: be, QPNum: 17, SrcQP: 18, WCFlags: 3}))
	f.Add(wcBytes(uapi.IBUverbsWC{WRID: 2, Opcode: 128, Ex: [4]byte{0x34, 0x12}, WCFlags: 4}))
	f.Add(wcBytes(uapi.IBUverbsWC{WRID: 5, Status: uint32(cq.WRFlushErr), Opcode: 128, VendorErr: 9, ByteLen: 77, QPNum: 3, WCFlags: 1}))
	f.Add(wcBytes(uapi.IBUverbsWC{WRID: ^uint64(0), Opcode: 129, WCFlags: 0xffffffff, Ex: be, PkeyIndex: 7, Slid: 9, Sl: 3, DlidPathBits: 1, PortNum: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < wcSize {
			b = append(b, make([]byte, wcSize-len(b))...)
		}
		b = b[:wcSize]
		var k uapi.IBUverbsWC
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&k)), wcSize), b)
		got := cq.WC{WRID: 0x5a5a, Imm: 0x5a5a, Flags: 0x5a, Timestamp: 0x5a5a} // convertWC must overwrite all of it
		convertWC(&got, &k)
		if diff := cmp.Diff(refWC(b), got); diff != "" {
			t.Fatalf("ib_uverbs_wc %x (-want +got):\n%s", b, diff)
		}
		if got.Status != cq.Success && (got.Opcode != 0 || got.ByteLen != 0 || got.Imm != 0 || got.SrcQP != 0 ||
			got.Flags != 0 || got.PKeyIndex != 0 || got.SLID != 0 || got.SL != 0 || got.DLIDPathBits != 0) {
			t.Fatalf("an error completion carries fields ibv_poll_cq(3) says are invalid: %+v", got)
		}
		if got.Flags&^(cq.WithGRH|cq.WithImm|cq.IPCsumOK|cq.WithInv) != 0 {
			t.Fatalf("flags %#x: rxe reports no such flag", got.Flags)
		}
		if got.Flags&cq.WithImm != 0 && got.Flags&cq.WithInv != 0 {
			t.Fatalf("flags %#x: immediate data and an invalidated rkey share one word", got.Flags)
		}
	})
}

// ringMem returns n zeroed bytes of 8-byte aligned Go memory, the way a
// mapped ring is aligned.
func ringMem(n int) []byte {
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)[:n]
}

const ringHdr = int(unsafe.Sizeof(uapi.RxeQueueBuf{})) // 384

// ring builds the bytes of a struct rxe_queue_buf and its slots.
func ring(log2, mask, prod, cons uint32, slots []byte) []byte {
	b := make([]byte, ringHdr, ringHdr+len(slots))
	var h uapi.RxeQueueBuf
	ne := binary.NativeEndian
	ne.PutUint32(b[unsafe.Offsetof(h.Log2ElemSize):], log2)
	ne.PutUint32(b[unsafe.Offsetof(h.IndexMask):], mask)
	ne.PutUint32(b[unsafe.Offsetof(h.ProducerIndex):], prod)
	ne.PutUint32(b[unsafe.Offsetof(h.ConsumerIndex):], cons)
	return append(b, slots...)
}

// FuzzPoll polls a CQ ring whose header, producer and consumer indices
// and slots are fuzz input, as a kernel bug or a stray store could leave
// them. newQueue must refuse a header whose slots do not fit the mapping;
// on one it accepts, Poll must read only inside the ring, return at most
// what was asked and at most what lies between the indices (masked, as
// rdma-core's queue_empty reads them), decode each slot as FuzzWC does,
// advance the consumer index by exactly what it returned, and write
// nothing else: not the ring, not the WCs past the count.
func FuzzPoll(f *testing.F) {
	slots := func(ks ...uapi.IBUverbsWC) []byte {
		var b []byte
		for _, k := range ks {
			b = append(b, wcBytes(k)...)
			b = append(b, make([]byte, 64-wcSize)...) // rxe's slots are 64 bytes
		}
		return b
	}
	four := slots(uapi.IBUverbsWC{WRID: 1, Opcode: 128, ByteLen: 8}, uapi.IBUverbsWC{WRID: 2},
		uapi.IBUverbsWC{WRID: 3, Status: 5}, uapi.IBUverbsWC{WRID: 4, WCFlags: 2, Ex: [4]byte{0, 0, 0, 9}})
	f.Add(ring(6, 3, 3, 0, four), uint8(16))      // three completions, room for more
	f.Add(ring(6, 3, 1, 2, four), uint8(16))      // wrapped: slots 2, 3, 0
	f.Add(ring(6, 3, 2, 2, four), uint8(16))      // empty
	f.Add(ring(6, 3, 3, 0, four), uint8(2))       // asked for fewer than are there
	f.Add(ring(6, 3, 0x10003, 0, four), uint8(9)) // an unmasked producer index
	f.Add(ring(6, 3, 3, 0xfffffff0, four), uint8(9))
	f.Add(ring(6, 7, 3, 0, four), uint8(16)) // more slots than the mapping holds
	f.Add(ring(5, 3, 3, 0, four), uint8(16)) // slots smaller than a CQE
	f.Add(ring(6, 2, 3, 0, four), uint8(16)) // a mask that is not 2^n-1
	f.Add(ring(31, 3, 3, 0, four), uint8(16))
	f.Add(ring(6, 0xffffffff, 3, 0, four), uint8(16))
	f.Fuzz(func(t *testing.T, raw []byte, want uint8) {
		mem := ringMem(len(raw))
		copy(mem, raw)
		r, err := newQueue(mem, uintptr(wcSize))
		if err != nil {
			return
		}
		ne := binary.NativeEndian
		var h uapi.RxeQueueBuf
		shift := ne.Uint32(raw[unsafe.Offsetof(h.Log2ElemSize):])
		mask := ne.Uint32(raw[unsafe.Offsetof(h.IndexMask):])
		prod := ne.Uint32(raw[unsafe.Offsetof(h.ProducerIndex):])
		cons := ne.Uint32(raw[unsafe.Offsetof(h.ConsumerIndex):])
		if end := uint64(ringHdr) + (uint64(mask)+1)<<shift; end > uint64(len(raw)) {
			t.Fatalf("newQueue accepted %d slots of 2^%d bytes in a %d-byte mapping", uint64(mask)+1, shift, len(raw))
		}
		q := &completionQueue{ring: r}
		q.live.Store(r)
		sentinel := cq.WC{WRID: 0xfeedface, Status: 77, Timestamp: 0xfeed}
		wcs := make([]cq.WC, int(want)+2)
		for i := range wcs {
			wcs[i] = sentinel
		}
		n := q.Poll(wcs[:want])

		avail := (prod&mask - cons&mask) & mask
		if wantN := min(uint32(want), avail); uint32(n) != wantN {
			t.Fatalf("Poll(%d) on prod %#x cons %#x mask %#x = %d, want %d", want, prod, cons, mask, n, wantN)
		}
		for i := range n {
			off := ringHdr + int((cons+uint32(i))&mask)<<shift
			if diff := cmp.Diff(refWC(raw[off:off+wcSize]), wcs[i]); diff != "" {
				t.Fatalf("WC %d, from slot %d (-want +got):\n%s", i, (cons+uint32(i))&mask, diff)
			}
		}
		for i := n; i < len(wcs); i++ {
			if wcs[i] != sentinel {
				t.Fatalf("Poll returned %d but wrote WC %d: %+v", n, i, wcs[i])
			}
		}
		wantCons := cons
		if n > 0 {
			wantCons = (cons + uint32(n)) & mask
		}
		if got := ne.Uint32(mem[unsafe.Offsetof(h.ConsumerIndex):]); got != wantCons {
			t.Fatalf("consumer index %#x after taking %d from %#x, want %#x", got, n, cons, wantCons)
		}
		ne.PutUint32(mem[unsafe.Offsetof(h.ConsumerIndex):], cons)
		if !bytes.Equal(mem, raw) {
			t.Fatal("Poll wrote to the ring beyond its consumer index")
		}
	})
}

// FuzzPostSend holds postOneSend's plain path (no call to
// provider.CheckSend) to its checked one on requests whose every field is
// fuzz input: the first two bytes choose the QP type (RC, UC or UD) and
// its SGE cap; the rest are requests, in batches, as sendfuzz.Batches
// reads them (opcode, flags with SendInline, up to five SGEs of 0 bytes to
// over 2 GiB, remote address, AH, where a batch ends and whether the
// kernel then takes everything posted). Both QPs must post the same requests, refuse
// them the same way (a request both over 2 GiB and facing a full queue may
// be refused for either), publish the same WQEs byte for byte (as far as
// the kernel reads them: wqeBytes) and end with the same producer index
// and send sequence number; nothing may panic.
func FuzzPostSend(f *testing.F) {
	f.Add([]byte{0, 2, 2, 0, 1, 1, 0, 0x10, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 5, 1, 1, 1, 0, 0x10, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 3, 0, 8, 2, 3, 0, 0x20, 0, 0, 20, 11, 0, 0, 0, 0, 0, 0, 3, 0, 1, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 2, 0, 0, 2, 3, 0, 0, 0, 0, 255, 255, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 1, 0, 0, 1, 1 | 2<<2, 0, 0, 0, 0, 30, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || len(data) > 2+64*sendfuzz.RecordSize {
			return
		}
		typ := []uint8{uapi.IB_UVERBS_QPT_RC, uapi.IB_UVERBS_QPT_UC, uapi.IB_UVERBS_QPT_UD}[int(data[0])%3]
		maxSGE := uint32(data[1]) % 5
		plain, checked := hostSendQP(t, typ, maxSGE), hostSendQP(t, typ, maxSGE)
		checked.plainOps = 0
		payload, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS) // what inline requests copy
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(payload)
		base := uint64(uintptr(unsafe.Pointer(&payload[0])))
		ahs := []*provider.AHRef{nil, {AH: &addressHandle{num: 3}}, {AH: &addressHandle{}}}
		sendfuzz.Batches(data[2:], base, ahs, func(last int, wrs []provider.SendWR, consume bool) {
			start := plain.sq.prod.Load()
			n1, err1 := plain.PostSend(wrs)
			n2, err2 := checked.PostSend(wrs)
			if n1 != n2 || !sendfuzz.SameRefusal(err1, err2) {
				t.Fatalf("request %d: PostSend = %d, %v; checked %d, %v\n%+v", last, n1, err1, n2, err2, wrs)
			}
			if a, b := plain.sq.prod.Load(), checked.sq.prod.Load(); a != b || plain.ssn != checked.ssn {
				t.Fatalf("request %d: producer index %d, ssn %d; checked %d, %d", last, a, plain.ssn, b, checked.ssn)
			}
			for p := start; p != plain.sq.prod.Load(); p = (p + 1) & plain.sq.mask {
				a, b := wqeBytes(plain, p), wqeBytes(checked, p)
				if !bytes.Equal(a, b) {
					t.Fatalf("request %d: the slot at %d\n%x\nchecked\n%x", last, p, a, b)
				}
			}
			if consume { // the kernel takes everything posted
				plain.sq.cons.Store(plain.sq.prod.Load())
				checked.sq.cons.Store(checked.sq.prod.Load())
			}
		})
	})
}

// wqeBytes returns the bytes of q's send slot p that the kernel reads: the
// header, then the inline data (the DMA length) or the SGEs (NumSGE of
// them). (A refused request may leave bytes past them, which a later,
// shorter WQE in the same slot does not clear.)
func wqeBytes(q *queuePair, p uint32) []byte {
	w := (*uapi.RxeSendWqe)(q.sq.slot(p))
	n := uintptr(w.Dma.NumSGE) * sgeSize
	if w.WR.SendFlags&provider.SendInline != 0 {
		n = uintptr(w.Dma.Length)
	}
	return unsafe.Slice((*byte)(q.sq.slot(p)), min(sendWQEHeader+n, q.sq.slotSize()))
}
