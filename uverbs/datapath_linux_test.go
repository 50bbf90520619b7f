package uverbs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

func TestRCDataPath(t *testing.T) {
	e := newQPEnv(t)
	a, b := e.qp(t, uverbs.RC), e.qp(t, uverbs.RC)
	rdmatest.ConnectRC(t, a, b)
	buf, err := uverbs.AllocBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := e.pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteAtomic)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	mem := buf.Bytes()
	// Layout: [0,4096) a's send, [4096,8192) b's receive, [8192,..) RDMA area, [16384] atomic word.
	copy(mem, "hello, rxe")

	// SEND / RECV, with immediate.
	if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 7, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 4096, 4096)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled,
		Imm: 0xdeadbeef, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 10)}}}); err != nil {
		t.Fatal(err)
	}
	wcs := rdmatest.PollN(t, e.cq, 2)
	byID := map[uint64]cq.WC{}
	for _, w := range wcs {
		if w.Status != cq.Success {
			t.Fatalf("completion %+v: %v", w, w.Status)
		}
		byID[w.WRID] = w
	}
	if s := byID[1]; s.Opcode != cq.OpSend || s.QPNum != a.QPN() {
		t.Errorf("send completion %+v", s)
	}
	r := byID[7]
	if r.Opcode != cq.OpRecv || r.ByteLen != 10 || r.Flags&cq.WithImm == 0 || r.Imm != 0xdeadbeef || r.QPNum != b.QPN() {
		t.Errorf("receive completion %+v", r)
	}
	if !bytes.Equal(mem[4096:4106], []byte("hello, rxe")) {
		t.Errorf("received %q", mem[4096:4106])
	}

	// RDMA WRITE WITH IMM consumes a receive and carries the immediate.
	if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 8}}); err != nil {
		t.Fatal(err)
	}
	copy(mem[100:], "written")
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRRDMAWriteWithImm, Flags: uverbs.SendSignaled,
		Imm: 42, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 100, 7)}, RemoteAddr: mr.Addr() + 8192, RKey: mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	for _, w := range rdmatest.PollN(t, e.cq, 2) {
		switch w.WRID {
		case 2:
			if w.Status != cq.Success || w.Opcode != cq.OpRDMAWrite {
				t.Errorf("write completion %+v", w)
			}
		case 8:
			if w.Status != cq.Success || w.Opcode != cq.OpRecvRDMAWithImm || w.Imm != 42 || w.ByteLen != 7 {
				t.Errorf("write-with-imm receive %+v", w)
			}
		}
	}
	if string(mem[8192:8199]) != "written" {
		t.Errorf("RDMA WRITE gave %q", mem[8192:8199])
	}

	// RDMA READ reports the bytes read.
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 3, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 200, 7)}, RemoteAddr: mr.Addr() + 8192, RKey: mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if w := rdmatest.PollN(t, e.cq, 1)[0]; w.WRID != 3 || w.Status != cq.Success || w.Opcode != cq.OpRDMARead || w.ByteLen != 7 {
		t.Errorf("read completion %+v", w)
	}
	if string(mem[200:207]) != "written" {
		t.Errorf("RDMA READ gave %q", mem[200:207])
	}

	// Atomics: fetch-and-add, then compare-and-swap.
	binary.NativeEndian.PutUint64(mem[16384:], 40)
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 4, Opcode: uverbs.WRAtomicFetchAdd, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 300, 8)}, RemoteAddr: mr.Addr() + 16384, RKey: mr.RKey(), CompareAdd: 2}}); err != nil {
		t.Fatal(err)
	}
	if w := rdmatest.PollN(t, e.cq, 1)[0]; w.Status != cq.Success || w.Opcode != cq.OpFetchAdd {
		t.Errorf("fetch-add completion %+v", w)
	}
	if old, now := binary.NativeEndian.Uint64(mem[300:]), binary.NativeEndian.Uint64(mem[16384:]); old != 40 || now != 42 {
		t.Errorf("fetch-add: old %d, now %d; want 40, 42", old, now)
	}

	// Inline send: no MR needed for the payload.
	if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 9, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 4096, 64)}}}); err != nil {
		t.Fatal(err)
	}
	payload := []byte("inline!")
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 5, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{{Addr: addrOf(payload), Length: uint32(len(payload))}}}}); err != nil {
		t.Fatal(err)
	}
	rdmatest.PollN(t, e.cq, 2)
	if string(mem[4096:4103]) != "inline!" {
		t.Errorf("inline send gave %q", mem[4096:4103])
	}
}

func TestPostBadInput(t *testing.T) {
	e := newQPEnv(t)
	a, b := e.qp(t, uverbs.RC), e.qp(t, uverbs.RC)
	rdmatest.ConnectRC(t, a, b)
	mem := make([]byte, 4096)
	mr, err := e.pd.RegMR(mem, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	tooMany := make([]uverbs.SGE, a.Cap().MaxSendSGE+1)
	for i := range tooMany {
		tooMany[i] = rdmatest.SGE(t, mr, i, 1)
	}
	for _, tt := range []struct {
		name string
		wr   uverbs.SendWR
		want error
	}{
		{"too many SGEs", uverbs.SendWR{Opcode: uverbs.WRSend, SGL: tooMany}, unix.EINVAL},
		{"inline too long", uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendInline, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 4000)}}, unix.EINVAL},
		{"unaligned atomic", uverbs.SendWR{Opcode: uverbs.WRAtomicFetchAdd, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 8)}, RemoteAddr: 3}, unix.EINVAL},
		{"inline RDMA read", uverbs.SendWR{Opcode: uverbs.WRRDMARead, Flags: uverbs.SendInline, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 8)}}, unix.EINVAL},
		{"unknown opcode", uverbs.SendWR{Opcode: 77}, unix.EOPNOTSUPP},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := a.PostSend([]uverbs.SendWR{tt.wr})
			if n != 0 || !errors.Is(err, tt.want) {
				t.Errorf("PostSend = %d, %v; want 0, %v", n, err, tt.want)
			}
			t.Log(err)
		})
	}
	// A receive with more SGEs than the QP takes is refused, by index,
	// after the good one before it; the queue is unchanged by the refusal.
	tooManyRecv := make([]uverbs.SGE, b.Cap().MaxRecvSGE+1)
	for i := range tooManyRecv {
		tooManyRecv[i] = rdmatest.SGE(t, mr, i, 1)
	}
	n, err := b.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 8)}}, {WRID: 2, SGL: tooManyRecv}})
	var op *uverbs.OpError
	if n != 1 || !errors.Is(err, unix.EINVAL) || !errors.As(err, &op) || op.Op != "post recv" || !strings.Contains(err.Error(), "work request 1") {
		t.Errorf("PostRecv of a good request, then one of %d SGEs = %d, %v; want 1, a post recv error naming work request 1 and wrapping EINVAL",
			len(tooManyRecv), n, err)
	}
	t.Log(err)

	// A full receive queue gives ENOMEM, after posting what fits.
	wrs := make([]uverbs.RecvWR, 64)
	n, err = b.PostRecv(wrs)
	if !errors.Is(err, unix.ENOMEM) || n < 15 || n >= 64 {
		t.Errorf("PostRecv of 64 on a 16-deep queue holding one = %d, %v; want ENOMEM after at least 15", n, err)
	}
	t.Logf("posted %d: %v", n, err)
}
