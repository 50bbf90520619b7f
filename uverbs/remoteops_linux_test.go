package uverbs_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// remoteOpsHere reports whether the device takes WRAtomicWrite and
// WRFlush: rxe from Linux 6.2 (c2d939002934, 124011e6e933), never mlx5.
// It also checks that the device's capabilities say the same.
func remoteOpsHere(t *testing.T, c *uverbs.Context) bool {
	t.Helper()
	want := rdmatest.Provider(t) == "rxe" && testutil.KernelAtLeast(t, 6, 2)
	a, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	caps := uverbs.DeviceCapAtomicWrite | uverbs.DeviceCapFlushGlobal | uverbs.DeviceCapFlushPersistent
	if got := a.DeviceCapFlagsEx.Has(caps); got != want {
		t.Fatalf("kernel %s, %s: capabilities %v, want ATOMIC_WRITE and FLUSH_* %t", testutil.KernelRelease(t), rdmatest.Provider(t), a.DeviceCapFlagsEx, want)
	}
	return want
}

// wantUnsupported checks err for the error a device without the opcode
// or right gives: ErrNotSupported, naming the kernel that has it (rxe) or
// saying mlx5 lacks it.
func wantUnsupported(t *testing.T, what string, err error) {
	t.Helper()
	say := "6.2"
	if rdmatest.Provider(t) == "mlx5" {
		say = "lacks"
	}
	if !errors.Is(err, uverbs.ErrNotSupported) || !strings.Contains(err.Error(), say) {
		t.Errorf("%s, kernel %s: %v; want ErrNotSupported saying %q", what, testutil.KernelRelease(t), err, say)
	}
}

// remoteEnv is a QP pair and, at b, 8 KiB of memory registered with the
// given rights; a posts, b is the target.
type remoteEnv struct {
	*qpEnv
	a, b *uverbs.QP
	mem  []byte
	mr   *uverbs.MR
}

func newRemoteEnv(t *testing.T, access uverbs.Access) *remoteEnv {
	t.Helper()
	e := &remoteEnv{qpEnv: newModelQPEnv(t)}
	buf, err := uverbs.AllocBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	e.mem = buf.Bytes()
	if e.mr, err = e.pd.RegMR(e.mem, access); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.mr.Close() })
	e.a, e.b = e.qp(t, uverbs.RC), e.qp(t, uverbs.RC)
	rdmatest.ConnectRC(t, e.a, e.b)
	return e
}

// post posts wr signaled and returns its completion.
func (e *remoteEnv) post(t *testing.T, wr uverbs.SendWR) cq.WC {
	t.Helper()
	wr.Flags |= uverbs.SendSignaled
	if _, err := e.a.PostSend([]uverbs.SendWR{wr}); err != nil {
		t.Fatalf("post %v: %v", wr.Opcode, err)
	}
	return rdmatest.PollN(t, e.cq, 1)[0]
}

// TestAtomicWrite writes 8 bytes into a peer's memory with one atomic
// store: they land as they lie in the sender's memory, and the bytes
// around them stay. Where the device lacks it (rxe before 6.2, mlx5) the
// post fails with ErrNotSupported and nothing is sent.
func TestAtomicWrite(t *testing.T) {
	e := newRemoteEnv(t, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	const v uint64 = 0x0102030405060708
	wr := uverbs.SendWR{WRID: 9, Opcode: uverbs.WRAtomicWrite, RemoteAddr: e.mr.Addr() + 64, RKey: e.mr.RKey(), Swap: v}
	if !remoteOpsHere(t, e.ctx) {
		n, err := e.a.PostSend([]uverbs.SendWR{wr})
		if n != 0 {
			t.Errorf("posted %d", n)
		}
		wantUnsupported(t, "atomic write", err)
		return
	}
	for i := range e.mem {
		e.mem[i] = 0xee
	}
	w := e.post(t, wr)
	if w.Status != cq.Success || w.Opcode != cq.OpAtomicWrite || w.WRID != 9 {
		t.Fatalf("completion %+v (%v, %v), want success of ATOMIC_WRITE", w, w.Status, w.Opcode)
	}
	if got := binary.NativeEndian.Uint64(e.mem[64:]); got != v {
		t.Errorf("the peer reads %#x, want %#x", got, v)
	}
	for i, c := range e.mem {
		if (i < 64 || i >= 72) && c != 0xee {
			t.Fatalf("byte %d is %#x: the write spilled", i, c)
		}
	}
}

// TestAtomicWriteMisuse: what the provider refuses at post (EINVAL: a UD
// or UC QP, an unaligned address, data in SGEs), and what the peer
// refuses (a remote access error: memory without remote write, an
// address past the region).
func TestAtomicWriteMisuse(t *testing.T) {
	e := newRemoteEnv(t, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	here := remoteOpsHere(t, e.ctx)
	ud, uc := e.qp(t, uverbs.UD), e.qp(t, uverbs.UC)
	src := rdmatest.SGE(t, e.mr, 0, 8)
	for _, c := range []struct {
		name string
		qp   *uverbs.QP
		wr   uverbs.SendWR
	}{
		{"UD", ud, uverbs.SendWR{Opcode: uverbs.WRAtomicWrite, RemoteAddr: e.mr.Addr(), RKey: e.mr.RKey()}},
		{"UC", uc, uverbs.SendWR{Opcode: uverbs.WRAtomicWrite, RemoteAddr: e.mr.Addr(), RKey: e.mr.RKey()}},
		{"unaligned", e.a, uverbs.SendWR{Opcode: uverbs.WRAtomicWrite, RemoteAddr: e.mr.Addr() + 4, RKey: e.mr.RKey()}},
		{"SGE", e.a, uverbs.SendWR{Opcode: uverbs.WRAtomicWrite, SGL: []uverbs.SGE{src}, RemoteAddr: e.mr.Addr(), RKey: e.mr.RKey()}},
	} {
		n, err := c.qp.PostSend([]uverbs.SendWR{c.wr})
		switch {
		case n != 0:
			t.Errorf("%s: posted %d", c.name, n)
		case !here:
			wantUnsupported(t, c.name, err)
		case !errors.Is(err, unix.EINVAL):
			t.Errorf("%s: %v, want EINVAL", c.name, err)
		}
	}
	if !here {
		return
	}
	// Each remote error takes the pair to the error state: a new pair each.
	noWrite := newRemoteEnv(t, uverbs.AccessLocalWrite|uverbs.AccessRemoteRead)
	if w := noWrite.post(t, uverbs.SendWR{Opcode: uverbs.WRAtomicWrite, RemoteAddr: noWrite.mr.Addr(), RKey: noWrite.mr.RKey(), Swap: 1}); w.Status != cq.RemAccessErr {
		t.Errorf("into memory without remote write: %v, want %v", w.Status, cq.RemAccessErr)
	}
	past := newRemoteEnv(t, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if w := past.post(t, uverbs.SendWR{Opcode: uverbs.WRAtomicWrite, RemoteAddr: past.mr.Addr() + 8192, RKey: past.mr.RKey(), Swap: 1}); w.Status != cq.RemAccessErr {
		t.Errorf("past the region: %v, want %v", w.Status, cq.RemAccessErr)
	}
}

// allowFlush gives qp, at RTS, the rights to take flushes (RTS to RTS,
// QP_ACCESS_FLAGS): rxe's responder checks them before the region's.
func allowFlush(t *testing.T, qp *uverbs.QP) {
	t.Helper()
	if err := qp.Modify(&uverbs.QPAttr{AccessFlags: rdmatest.AllAccess | uverbs.AccessFlushGlobal}, uverbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
}

// TestFlush flushes a range a peer wrote, then the whole region, for
// global visibility. Where the device lacks it (rxe before 6.2, mlx5),
// registering memory for flushes and posting one both fail with
// ErrNotSupported.
func TestFlush(t *testing.T) {
	e := newRemoteEnv(t, uverbs.AccessLocalWrite)
	here := remoteOpsHere(t, e.ctx)
	buf, err := uverbs.AllocBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := e.pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessFlushGlobal)
	if !here {
		if mr != nil {
			mr.Close()
			t.Fatal("registered memory for flushes")
		}
		wantUnsupported(t, "reg mr with AccessFlushGlobal", err)
		_, err := e.a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRFlush, RemoteAddr: e.mr.Addr(), RKey: e.mr.RKey(), Imm: 64, FlushType: uverbs.FlushGlobal}})
		wantUnsupported(t, "flush", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	allowFlush(t, e.b)
	src := rdmatest.SGE(t, e.mr, 0, 512)
	copy(e.mem, "flushed")
	if w := e.post(t, uverbs.SendWR{Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{src}, RemoteAddr: mr.Addr() + 4096, RKey: mr.RKey()}); w.Status != cq.Success {
		t.Fatalf("write: %v", w.Status)
	}
	for _, c := range []struct {
		name string
		wr   uverbs.SendWR
	}{
		{"range", uverbs.SendWR{WRID: 1, Opcode: uverbs.WRFlush, RemoteAddr: mr.Addr() + 4096, RKey: mr.RKey(), Imm: 512, FlushType: uverbs.FlushGlobal}},
		{"region", uverbs.SendWR{WRID: 2, Opcode: uverbs.WRFlush, RKey: mr.RKey(), FlushType: uverbs.FlushGlobal, FlushLevel: uverbs.FlushMR}},
	} {
		if w := e.post(t, c.wr); w.Status != cq.Success || w.Opcode != cq.OpFlush || w.WRID != c.wr.WRID {
			t.Errorf("flush of a %s: completion %+v (%v, %v), want success of FLUSH", c.name, w, w.Status, w.Opcode)
		}
	}
	if string(buf.Bytes()[4096:4103]) != "flushed" {
		t.Errorf("the region holds %q", buf.Bytes()[4096:4103])
	}
}

// TestFlushMisuse: what the provider refuses at post (EINVAL: a UD or UC
// QP, no flush type), a persistent registration of RAM (EINVAL), and what
// the peer refuses: a range past the region or a region without flush
// rights (a remote access error), a QP without them (a remote invalid
// request error).
func TestFlushMisuse(t *testing.T) {
	e := newRemoteEnv(t, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if !remoteOpsHere(t, e.ctx) {
		_, err := e.pd.RegMR(e.mem, uverbs.AccessLocalWrite|uverbs.AccessFlushPersistent)
		wantUnsupported(t, "reg mr with AccessFlushPersistent", err)
		return
	}
	ud, uc := e.qp(t, uverbs.UD), e.qp(t, uverbs.UC)
	flush := uverbs.SendWR{Opcode: uverbs.WRFlush, RemoteAddr: e.mr.Addr(), RKey: e.mr.RKey(), Imm: 64, FlushType: uverbs.FlushGlobal}
	noType := flush
	noType.FlushType = 0
	for _, c := range []struct {
		name string
		qp   *uverbs.QP
		wr   uverbs.SendWR
	}{{"UD", ud, flush}, {"UC", uc, flush}, {"no type", e.a, noType}} {
		if n, err := c.qp.PostSend([]uverbs.SendWR{c.wr}); n != 0 || !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %d, %v; want EINVAL", c.name, n, err)
		}
	}
	// "is_pmem_page" (rxe_mr.c) refuses a persistent registration of RAM.
	if mr, err := e.pd.RegMR(e.mem, uverbs.AccessLocalWrite|uverbs.AccessFlushGlobal|uverbs.AccessFlushPersistent); err == nil {
		mr.Close()
		t.Error("registered RAM for persistent flushes")
	} else if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "pmem") {
		t.Errorf("persistent registration of RAM: %v, want EINVAL naming pmem", err)
	}

	for _, c := range []struct {
		name   string
		access uverbs.Access // the region's
		qpOK   bool          // the target QP allows flushes
		off    uint64
		want   cq.Status
	}{
		{"past the region", uverbs.AccessLocalWrite | uverbs.AccessFlushGlobal, true, 8192 - 32, cq.RemAccessErr},
		{"region without flush rights", uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite, true, 0, cq.RemAccessErr},
		{"QP without flush rights", uverbs.AccessLocalWrite | uverbs.AccessFlushGlobal, false, 0, cq.RemInvReqErr},
	} {
		p := newRemoteEnv(t, c.access) // each error takes the pair to the error state
		if c.qpOK {
			allowFlush(t, p.b)
		}
		w := p.post(t, uverbs.SendWR{Opcode: uverbs.WRFlush, RemoteAddr: p.mr.Addr() + c.off, RKey: p.mr.RKey(), Imm: 64, FlushType: uverbs.FlushGlobal})
		if w.Status != c.want {
			t.Errorf("%s: %v, want %v", c.name, w.Status, c.want)
		}
	}
}

// TestAtomicWriteAndFlushAllocs: posting an atomic write and a flush
// allocates nothing.
func TestAtomicWriteAndFlushAllocs(t *testing.T) {
	e := newRemoteEnv(t, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if !remoteOpsHere(t, e.ctx) {
		t.Skipf("kernel %s, %s: no atomic write or flush to post (TestAtomicWrite checks the error)", testutil.KernelRelease(t), rdmatest.Provider(t))
	}
	fmr, err := e.pd.RegMR(e.mem[4096:], uverbs.AccessLocalWrite|uverbs.AccessFlushGlobal)
	if err != nil {
		t.Fatal(err)
	}
	defer fmr.Close()
	allowFlush(t, e.b)
	wrs := []uverbs.SendWR{
		{Opcode: uverbs.WRAtomicWrite, Flags: uverbs.SendSignaled, RemoteAddr: e.mr.Addr(), RKey: e.mr.RKey(), Swap: 5},
		{Opcode: uverbs.WRFlush, Flags: uverbs.SendSignaled, RemoteAddr: fmr.Addr(), RKey: fmr.RKey(), Imm: 8, FlushType: uverbs.FlushGlobal},
	}
	wcs := make([]cq.WC, 2)
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := e.a.PostSend(wrs[:1]); err != nil {
			t.Fatal(err)
		}
		if _, err := e.a.PostSend(wrs[1:]); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 2; {
			k, err := e.cq.Poll(wcs)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wcs[:k] {
				if w.Status != cq.Success {
					t.Fatalf("%v: %v", w.Opcode, w.Status)
				}
			}
			n += k
		}
	})
	if allocs != 0 {
		t.Errorf("atomic write and flush: %.1f allocations, want 0", allocs)
	}
}
