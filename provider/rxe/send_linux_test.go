package rxe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// hostSendQP is a QP of type typ whose send queue is anonymous memory
// (slots of 256 bytes: three SGEs or 48 bytes inline) and whose doorbell
// writes to /dev/null, so that the send path can be run on the host. The
// caps are the kernel's answer: maxSGE SGEs, 32 bytes inline.
func hostSendQP(t *testing.T, typ uint8, maxSGE uint32) *queuePair {
	t.Helper()
	const slots = 8
	mem, err := unix.Mmap(-1, 0, 4096+slots*256, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	h := (*uapi.RxeQueueBuf)(unsafe.Pointer(&mem[0]))
	h.Log2ElemSize, h.IndexMask = 8, slots-1
	sq, err := newQueue(mem, sendWQEHeader)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	q := &queuePair{sq: sq, typ: typ, conn: transport.NewConn(fd, uapi.RDMA_DRIVER_RXE),
		doorbell: kverbs.NewSendDoorbell(1), plainOps: provider.PlainSendOps(typ)}
	q.k.Cap.MaxSendSGE, q.k.Cap.MaxInlineData = maxSGE, 32
	q.sendSGE = min(maxSGE, uint32((sq.slotSize()-sendWQEHeader)/sgeSize))
	q.ext = &extOps{}
	q.ext.caps.Store(remoteCaps | extProbed) // as 6.12's rxe
	return q
}

// lastWQE returns the bytes of the WQE the last post published.
func lastWQE(q *queuePair) []byte {
	p := (q.sq.prod.Load() - 1) & q.sq.mask
	return unsafe.Slice((*byte)(q.sq.slot(p)), q.sq.slotSize())
}

// TestPostSendPlainPath holds postOneSend's plain path (no call to
// provider.CheckSend) to the checked one: for every opcode a plain path
// takes, on RC and UC, with one and two SGEs, the WQE written is the same
// byte for byte when the QP is made to check every request.
func TestPostSendPlainPath(t *testing.T) {
	sgl := []provider.SGE{{Addr: 0x1000, Length: 100, LKey: 7}, {Addr: 0x9000, Length: 28, LKey: 8}}
	for _, typ := range []uint8{uapi.IB_UVERBS_QPT_RC, uapi.IB_UVERBS_QPT_UC} {
		for op := uint32(0); op < 32; op++ {
			if provider.PlainSendOps(typ)>>op&1 == 0 {
				continue
			}
			for n := 1; n <= 2; n++ {
				t.Run(fmt.Sprintf("type%d/op%d/sge%d", typ, op, n), func(t *testing.T) {
					wr := provider.SendWR{WRID: 42, Opcode: op, Flags: provider.SendSignaled, SGL: sgl[:n],
						Imm: 0x01020304, RemoteAddr: 0xabcd000, RKey: 99}
					plain, checked := hostSendQP(t, typ, 2), hostSendQP(t, typ, 2)
					checked.plainOps = 0
					for _, q := range []*queuePair{plain, checked} {
						if got, err := q.PostSend([]provider.SendWR{wr}); got != 1 || err != nil {
							t.Fatalf("PostSend = %d, %v", got, err)
						}
					}
					if a, b := lastWQE(plain), lastWQE(checked); !bytes.Equal(a, b) {
						t.Errorf("plain path's WQE\n%x\nchecked path's\n%x", a, b)
					}
					w := (*uapi.RxeSendWqe)(unsafe.Pointer(&lastWQE(plain)[0]))
					if want := [...]uint32{0, 100, 128}[n]; w.Dma.Length != want || w.Dma.NumSGE != uint32(n) || w.WR.Opcode != op || w.WR.WRID != 42 || w.WR.SendFlags != provider.SendSignaled || w.Ssn != 1 {
						t.Errorf("WQE: length %d, SGEs %d, opcode %d, WRID %d, flags %#x, ssn %d",
							w.Dma.Length, w.Dma.NumSGE, w.WR.Opcode, w.WR.WRID, w.WR.SendFlags, w.Ssn)
					}
				})
			}
		}
	}
}

// TestPostSendRefused: requests the plain path must not take, each
// refused with nothing published.
func TestPostSendRefused(t *testing.T) {
	big := []provider.SGE{{Length: provider.MaxSendLength}, {Length: 1}}
	sge := []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}
	for _, tc := range []struct {
		name   string
		typ    uint8
		maxSGE uint32
		wr     provider.SendWR
		want   error
	}{
		{"over 2 GiB", uapi.IB_UVERBS_QPT_RC, 2, provider.SendWR{Opcode: provider.WRSend, SGL: big}, unix.EINVAL},
		{"more SGEs than the cap", uapi.IB_UVERBS_QPT_RC, 1, provider.SendWR{Opcode: provider.WRSend, SGL: big}, unix.EINVAL},
		{"more SGEs than a slot holds", uapi.IB_UVERBS_QPT_RC, 8, provider.SendWR{Opcode: provider.WRSend, SGL: make([]provider.SGE, 4)}, unix.EINVAL},
		{"read on UC", uapi.IB_UVERBS_QPT_UC, 2, provider.SendWR{Opcode: provider.WRRDMARead, SGL: sge}, unix.EINVAL},
		{"short atomic", uapi.IB_UVERBS_QPT_RC, 2, provider.SendWR{Opcode: provider.WRAtomicFetchAdd, SGL: []provider.SGE{{Length: 4}}}, unix.EINVAL},
		{"opcode 33", uapi.IB_UVERBS_QPT_RC, 2, provider.SendWR{Opcode: 33, SGL: sge}, unix.EOPNOTSUPP},
		{"opcode 1<<31", uapi.IB_UVERBS_QPT_RC, 2, provider.SendWR{Opcode: 1 << 31, SGL: sge}, unix.EOPNOTSUPP},
		{"inline too long", uapi.IB_UVERBS_QPT_RC, 2, provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline, SGL: []provider.SGE{{Length: 33}}}, unix.EINVAL},
		{"UD without an AH", uapi.IB_UVERBS_QPT_UD, 2, provider.SendWR{Opcode: provider.WRSend, SGL: sge}, unix.EINVAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := hostSendQP(t, tc.typ, tc.maxSGE)
			n, err := q.PostSend([]provider.SendWR{tc.wr})
			if n != 0 || !errors.Is(err, tc.want) {
				t.Errorf("PostSend = %d, %v; want 0 and %v", n, err, tc.want)
			}
			if p := q.sq.prod.Load(); p != 0 {
				t.Errorf("producer index %d after a refused request", p)
			}
		})
	}
}

// TestPostSendInline: an inline request takes the checked path and
// copies its bytes into the slot.
func TestPostSendInline(t *testing.T) {
	q := hostSendQP(t, uapi.IB_UVERBS_QPT_RC, 2)
	a, b := []byte("hello, "), []byte("world")
	sgl := []provider.SGE{
		{Addr: uint64(uintptr(unsafe.Pointer(&a[0]))), Length: uint32(len(a))},
		{Addr: uint64(uintptr(unsafe.Pointer(&b[0]))), Length: uint32(len(b))},
	}
	if n, err := q.PostSend([]provider.SendWR{{Opcode: provider.WRSend, Flags: provider.SendInline, SGL: sgl}}); n != 1 || err != nil {
		t.Fatalf("PostSend = %d, %v", n, err)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	w := lastWQE(q)
	if got := string(w[sendWQEHeader : sendWQEHeader+12]); got != "hello, world" {
		t.Errorf("inline data %q", got)
	}
	if d := (*uapi.RxeSendWqe)(unsafe.Pointer(&w[0])).Dma; d.Length != 12 || d.NumSGE != 0 {
		t.Errorf("dma length %d, SGEs %d", d.Length, d.NumSGE)
	}
}

// TestPostRemoteOps: an ATOMIC_WRITE's and a FLUSH's WQEs as rdma-core's
// rxe provider lays them out (wr_atomic_write, wr_flush), and both
// refused with ErrNotSupported, nothing published, where the device
// lacks them (rxe before Linux 6.2).
func TestPostRemoteOps(t *testing.T) {
	ne := binary.NativeEndian
	q := hostSendQP(t, uapi.IB_UVERBS_QPT_RC, 1)
	wrs := []provider.SendWR{
		{WRID: 1, Opcode: provider.WRAtomicWrite, Flags: provider.SendSignaled, RemoteAddr: 0xab0, RKey: 77, Swap: 0x1122334455667788},
		{WRID: 2, Opcode: provider.WRFlush, RemoteAddr: 0xc00, RKey: 78, Imm: 4096, FlushType: provider.FlushGlobal, FlushLevel: provider.FlushMR},
	}
	for i := range wrs {
		if n, err := q.PostSend(wrs[i : i+1]); n != 1 || err != nil {
			t.Fatalf("PostSend(%v) = %d, %v", wrs[i].Opcode, n, err)
		}
		b := lastWQE(q)
		w := (*uapi.RxeSendWqe)(unsafe.Pointer(&b[0]))
		u := w.WR.WR[:]
		if w.WR.WRID != wrs[i].WRID || w.WR.Opcode != wrs[i].Opcode || w.WR.SendFlags != wrs[i].Flags || w.Iova != wrs[i].RemoteAddr || w.Ssn != uint32(i+1) || w.Dma.NumSGE != 0 {
			t.Errorf("%v: WQE header %+v", wrs[i].Opcode, w.WR)
		}
		if i == 0 {
			if ne.Uint64(u[wrRDMARemoteAddr:]) != 0xab0 || ne.Uint32(u[wrRDMARKey:]) != 77 || w.Dma.Length != 8 || w.Dma.Resid != 8 ||
				ne.Uint64(b[uapi.OffsetRxeSendWqeDmaAtomicWR:]) != 0x1122334455667788 {
				t.Errorf("atomic write's WQE:\n%x", b)
			}
			continue
		}
		if ne.Uint64(u[wrFlushRemoteAddr:]) != 0xc00 || ne.Uint32(u[wrFlushRKey:]) != 78 || ne.Uint32(u[wrFlushLength:]) != 4096 ||
			u[wrFlushType] != provider.FlushGlobal || u[wrFlushLevel] != provider.FlushMR || w.Dma.Length != 4096 || w.Dma.Resid != 4096 {
			t.Errorf("flush's WQE:\n%x", b)
		}
	}

	old := hostSendQP(t, uapi.IB_UVERBS_QPT_RC, 1)
	old.ext.caps.Store(extProbed) // 6.1's rxe: none of the capabilities
	for i := range wrs {
		n, err := old.PostSend(wrs[i : i+1])
		if n != 0 || !errors.Is(err, errs.ErrNotSupported) || !strings.Contains(err.Error(), "6.2") {
			t.Errorf("%v without the capability: %d, %v; want ErrNotSupported naming 6.2", wrs[i].Opcode, n, err)
		}
	}
	if p := old.sq.prod.Load(); p != 0 {
		t.Errorf("producer index %d after refused requests", p)
	}
}
