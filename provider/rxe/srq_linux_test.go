package rxe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// hostRecvQueue is a receive ring in anonymous memory: slots of 128
// bytes (five SGEs after the 40-byte header), 8 of them (7 usable).
func hostRecvQueue(t *testing.T) *queue {
	t.Helper()
	const slots = 8
	mem, err := unix.Mmap(-1, 0, 4096+slots*128, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	h := (*uapi.RxeQueueBuf)(unsafe.Pointer(&mem[0]))
	h.Log2ElemSize, h.IndexMask = 7, slots-1
	q, err := newQueue(mem, recvWQEHeader)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// An SRQ's ring takes receives as a QP's receive queue does, WQE for WQE;
// it refuses more SGEs than its cap, and a post into a full ring, naming
// the request and posting those before it; a post allocates nothing.
func TestSRQPostRecv(t *testing.T) {
	srq := &sharedRecvQueue{k: kverbs.SRQ{MaxSGE: 2}, rq: hostRecvQueue(t)}
	srq.sge = srq.k.MaxSGE
	qp := &queuePair{rq: hostRecvQueue(t), recvSGE: 2}
	qp.k.Cap.MaxRecvSGE = 2
	wrs := []provider.RecvWR{
		{WRID: 1, SGL: []provider.SGE{{Addr: 0x1000, Length: 100, LKey: 7}}},
		{WRID: 2, SGL: []provider.SGE{{Addr: 0x2000, Length: 64, LKey: 7}, {Addr: 0x3000, Length: 36, LKey: 8}}},
		{WRID: 3},
	}
	for _, p := range []interface {
		PostRecv([]provider.RecvWR) (int, error)
	}{srq, qp} {
		if n, err := p.PostRecv(wrs); n != 3 || err != nil {
			t.Fatalf("%T: posted %d, %v", p, n, err)
		}
	}
	for i := range uint32(3) {
		a := unsafe.Slice((*byte)(srq.rq.slot(i)), srq.rq.slotSize())
		b := unsafe.Slice((*byte)(qp.rq.slot(i)), qp.rq.slotSize())
		if !bytes.Equal(a, b) {
			t.Errorf("WQE %d: the SRQ's\n%x\nthe QP's\n%x", i, a, b)
		}
	}

	three := []provider.RecvWR{wrs[0], {WRID: 9, SGL: make([]provider.SGE, 3)}}
	if n, err := srq.PostRecv(three); n != 1 || !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "the SRQ takes 2") {
		t.Errorf("a receive of 3 SGEs: posted %d, %v; want 1 and EINVAL naming the SRQ's cap", n, err)
	}
	// 4 posted so far: 3 of the 7 slots are free.
	if n, err := srq.PostRecv(append(wrs, wrs...)); n != 3 || !errors.Is(err, unix.ENOMEM) || !strings.Contains(err.Error(), "work request 3") {
		t.Errorf("posting 6 into 3 free slots: posted %d, %v; want 3 and ENOMEM naming request 3", n, err)
	}
	one := wrs[:1]
	if n := testing.AllocsPerRun(100, func() {
		srq.rq.cons.Store(srq.rq.prod.Load()) // the kernel took them
		if _, err := srq.PostRecv(one); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("PostRecv allocates %v times", n)
	}
}

// On rxe0: the ring the kernel maps for an SRQ takes as many receives as
// MaxWR says and refuses the next; the limit arms (Query shows it);
// resizing is refused as not supported; Destroy unmaps the ring.
func TestSRQOnDevice(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	fd, err := unix.Open(testutil.DevicePath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	conn := transport.NewConn(fd, uapi.RDMA_DRIVER_RXE)
	c, _, err := driver{}.Open(conn, fd)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := kverbs.AllocPD(conn)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateSRQ(kverbs.SRQReq{PD: pd, MaxWR: 16, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := p.(*sharedRecvQueue)
	if s.MaxWR() < 16 || s.SRQN() == 0 || s.MaxWR() != s.size {
		t.Errorf("MaxWR %d (the ring holds %d), SRQN %d: want the ring's size, at least 16, and a number", s.MaxWR(), s.size, s.SRQN())
	}
	wrs := make([]provider.RecvWR, s.MaxWR()+1)
	for i := range wrs {
		wrs[i] = provider.RecvWR{WRID: uint64(i), SGL: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}
	}
	if n, err := s.PostRecv(wrs); n != int(s.MaxWR()) || !errors.Is(err, unix.ENOMEM) {
		t.Errorf("posting MaxWR+1 receives: %d posted, %v; want MaxWR and ENOMEM", n, err)
	}
	if err := s.Modify(kverbs.SRQLimit, kverbs.SRQAttr{Limit: 4}); err != nil {
		t.Fatal(err)
	}
	if a, err := kverbs.QuerySRQ(conn, s.Handle()); err != nil || a.Limit != 4 {
		t.Errorf("query after arming the limit at 4: %+v, %v", a, err)
	}
	// A resize: the kernel copies the posted receives into a new ring,
	// which replaces the old mapping.
	old := uintptr(unsafe.Pointer(unsafe.SliceData(s.rq.mem)))
	if err := s.Modify(kverbs.SRQMaxWR, kverbs.SRQAttr{MaxWR: 64}); err != nil {
		t.Fatalf("resize to 64: %v", err)
	}
	if s.MaxWR() < 64 || s.MaxWR() != s.size || mapped(t, old) {
		t.Errorf("after resizing to 64: MaxWR %d, ring of %d, the old ring mapped: %t", s.MaxWR(), s.size, mapped(t, old))
	}
	if held := (s.rq.prod.Load() - s.rq.cons.Load()) & s.rq.mask; held != uint32(len(wrs)-1) {
		t.Errorf("the new ring holds %d receives, want the %d posted", held, len(wrs)-1)
	}
	ring := uintptr(unsafe.Pointer(unsafe.SliceData(s.rq.mem)))
	if _, err := s.Destroy(); err != nil {
		t.Fatal(err)
	}
	if mapped(t, ring) {
		t.Error("the ring is still mapped after Destroy")
	}
}

// FuzzPostSRQRecv posts the same receives to an SRQ and to a QP's receive
// queue, rings of the same shape, in batches the input cuts (each record:
// a byte of SGE count, batch end and whether the kernel then takes all
// posted; a WRID; a length a SGE): both must post as many, refuse the
// same way (EINVAL or ENOMEM), write the same WQEs byte for byte and
// end at the same producer index; nothing may panic.
func FuzzPostSRQRecv(f *testing.F) {
	f.Add([]byte{2, 0x41, 1, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0})
	f.Add([]byte{1, 0x02, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0x80})
	f.Add([]byte{5, 0x05, 9, 9, 9, 9, 9, 9, 9, 9, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 || len(data) > 4096 {
			return
		}
		maxSGE := uint32(data[0]) % 6 // a slot holds five
		srq := &sharedRecvQueue{k: kverbs.SRQ{MaxSGE: maxSGE}, rq: hostRecvQueue(t), sge: maxSGE}
		qp := &queuePair{rq: hostRecvQueue(t), recvSGE: maxSGE}
		qp.k.Cap.MaxRecvSGE = maxSGE
		var batch []provider.RecvWR
		post := func(consume bool) {
			start := srq.rq.prod.Load()
			n1, err1 := srq.PostRecv(batch)
			n2, err2 := qp.PostRecv(batch)
			if n1 != n2 || errors.Is(err1, unix.EINVAL) != errors.Is(err2, unix.EINVAL) ||
				errors.Is(err1, unix.ENOMEM) != errors.Is(err2, unix.ENOMEM) || (err1 == nil) != (err2 == nil) {
				t.Fatalf("PostRecv: SRQ %d, %v; QP %d, %v\n%+v", n1, err1, n2, err2, batch)
			}
			if a, b := srq.rq.prod.Load(), qp.rq.prod.Load(); a != b {
				t.Fatalf("producer index: SRQ %d, QP %d", a, b)
			}
			for p := start; p != srq.rq.prod.Load(); p = (p + 1) & srq.rq.mask {
				w := (*uapi.RxeRecvWqe)(srq.rq.slot(p))
				n := recvWQEHeader + uintptr(min(w.Dma.NumSGE, 5))*sgeSize
				a := unsafe.Slice((*byte)(srq.rq.slot(p)), n)
				b := unsafe.Slice((*byte)(qp.rq.slot(p)), n)
				if !bytes.Equal(a, b) {
					t.Fatalf("the slot at %d: SRQ\n%x\nQP\n%x", p, a, b)
				}
			}
			if consume {
				srq.rq.cons.Store(srq.rq.prod.Load())
				qp.rq.cons.Store(qp.rq.prod.Load())
			}
			batch = batch[:0]
		}
		for rest := data[1:]; len(rest) >= 9; {
			b := rest[0]
			wr := provider.RecvWR{WRID: binary.LittleEndian.Uint64(rest[1:9])}
			rest = rest[9:]
			for range int(b & 7) {
				if len(rest) < 4 {
					break
				}
				l := binary.LittleEndian.Uint32(rest)
				wr.SGL = append(wr.SGL, provider.SGE{Addr: 0x1000 + uint64(l), Length: l, LKey: l >> 8})
				rest = rest[4:]
			}
			batch = append(batch, wr)
			if b&0x40 != 0 || len(rest) < 9 {
				post(b&0x80 != 0)
			}
		}
	})
}
