package uverbs_test

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// mwEnv is a PD with one CQ, a buffer registered for binding windows
// (local write and MW_BIND, no remote rights of its own) and a second
// registration a peer writes from.
type mwEnv struct {
	*qpEnv
	mem   []byte
	mr    *uverbs.MR // the target: no remote access but through windows
	src   *uverbs.MR // the peer's source
	srcMe []byte
	kept  []byte // mem as it should be: kept after each access allowed to change it
}

func newMWEnv(t *testing.T) *mwEnv {
	e := &mwEnv{qpEnv: newModelQPEnv(t)}
	buf, err := uverbs.AllocBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	e.mem = buf.Bytes()[:1<<15]
	e.srcMe = buf.Bytes()[1<<15:]
	for i := range e.mem {
		e.mem[i] = byte(i * 7)
	}
	if e.mr, err = e.pd.RegMR(e.mem, uverbs.AccessLocalWrite|uverbs.AccessMWBind); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.mr.Close() })
	if e.src, err = e.pd.RegMR(e.srcMe, uverbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.src.Close() })
	copy(e.srcMe, "written through a window")
	return e
}

// pair is two RC QPs connected to each other: a is the peer, b the
// owner of the memory.
func (e *mwEnv) pair(t *testing.T) (a, b *uverbs.QP) {
	a, b = e.qp(t, uverbs.RC), e.qp(t, uverbs.RC)
	rdmatest.ConnectRC(t, a, b)
	return a, b
}

// post posts one request and returns its completion (the only one due).
func (e *mwEnv) post(t *testing.T, qp *uverbs.QP, wr uverbs.SendWR) cq.WC {
	t.Helper()
	wr.Flags |= uverbs.SendSignaled
	if _, err := qp.PostSend([]uverbs.SendWR{wr}); err != nil {
		t.Fatalf("post %v: %v", wr.Opcode, err)
	}
	return rdmatest.PollN(t, e.cq, 1)[0]
}

// write has a write 24 bytes at addr with rkey and returns its status.
func (e *mwEnv) write(t *testing.T, a *uverbs.QP, addr uint64, rkey uint32) cq.Status {
	t.Helper()
	return e.post(t, a, uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite,
		SGL: []uverbs.SGE{rdmatest.SGE(t, e.src, 0, 24)}, RemoteAddr: addr, RKey: rkey}).Status
}

func (e *mwEnv) bind(t *testing.T, qp *uverbs.QP, b *uverbs.MWBind) {
	t.Helper()
	if w := e.post(t, qp, uverbs.SendWR{WRID: 2, Opcode: uverbs.WRBindMW, Bind: b}); w.Status != cq.Success || w.Opcode != cq.OpBindMW {
		t.Fatalf("bind: completion %+v (%v)", w, w.Status)
	}
}

// TestMemoryWindows opens part of a region to one peer through a type-2
// window, and checks that nobody else gets in: another connection with
// the window's key, any peer after the window is invalidated (locally or
// by the peer's send with invalidate), a stale key. Each refused access
// ends with a remote access error at the peer and the memory
// byte-for-byte as it was; it takes both QPs of that connection to the
// error state, as the verbs say, and the other connections stay up.
func TestMemoryWindows(t *testing.T) {
	e := newMWEnv(t)
	mw, err := e.pd.AllocMW(uverbs.MWType2)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close() // before the QPs (t.Cleanup): rxe waits on a bound window's QP
	if mw.Type() != uverbs.MWType2 || mw.PD() != e.pd {
		t.Errorf("window of type %d on %p, want type 2 on %p", mw.Type(), mw.PD(), e.pd)
	}
	win := uverbs.MWBind{MW: mw, MR: e.mr, Addr: e.mr.Addr() + 4096, Length: 4096, Access: uverbs.AccessRemoteWrite}
	unchanged := func(what string) {
		t.Helper()
		if got, want := crc32.ChecksumIEEE(e.mem), crc32.ChecksumIEEE(e.kept); got != want {
			t.Errorf("%s: the memory changed", what)
		}
	}

	a, b := e.pair(t)
	key0 := mw.RKey()
	e.bind(t, b, &win)
	key := mw.RKey()
	if key == key0 || key>>8 != key0>>8 {
		t.Errorf("bind made key %#x of %#x, want the low byte advanced", key, key0)
	}
	if s := e.write(t, a, win.Addr+100, key); s != cq.Success {
		t.Fatalf("the window's peer: write %v", s)
	}
	if !bytes.Equal(e.mem[4196:4220], e.srcMe[:24]) {
		t.Fatalf("the window's peer wrote %q", e.mem[4196:4220])
	}
	e.keep()

	// The key through another connection: the window is b's alone.
	c, _ := e.pair(t)
	if s := e.write(t, c, win.Addr+200, key); s != cq.RemAccessErr {
		t.Errorf("another connection with the window's key: %v, want %v", s, cq.RemAccessErr)
	}
	unchanged("another connection")
	// The MR's own key: no remote rights.
	c, _ = e.pair(t)
	if s := e.write(t, c, win.Addr, e.mr.RKey()); s != cq.RemAccessErr {
		t.Errorf("the MR's key: %v, want %v", s, cq.RemAccessErr)
	}
	unchanged("the MR's key")
	// A stale key (the window's before the bind).
	c, _ = e.pair(t)
	if s := e.write(t, c, win.Addr, key0); s != cq.RemAccessErr {
		t.Errorf("the stale key: %v, want %v", s, cq.RemAccessErr)
	}
	unchanged("a stale key")

	// a still works: its window is intact.
	if s := e.write(t, a, win.Addr, key); s != cq.Success {
		t.Fatalf("the window's peer after the others: %v", s)
	}
	e.keep()

	// Revoked here: LOCAL_INV.
	if w := e.post(t, b, uverbs.SendWR{WRID: 3, Opcode: uverbs.WRLocalInv, Bind: &uverbs.MWBind{MW: mw}}); w.Status != cq.Success || w.Opcode != cq.OpLocalInv {
		t.Fatalf("local invalidate: %+v (%v)", w, w.Status)
	}
	if s := e.write(t, a, win.Addr, key); s != cq.RemAccessErr {
		t.Errorf("after local invalidate: %v, want %v", s, cq.RemAccessErr)
	}
	unchanged("after local invalidate")
	// A second invalidation, of the window now unbound, is refused at
	// post: rxe's kernel would panic on it.
	_, b = e.pair(t)
	if _, err := b.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRLocalInv, Bind: &uverbs.MWBind{MW: mw}}}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("invalidating an unbound window: %v, want EINVAL", err)
	}

	// Revoked by the peer: SEND_WITH_INV, on a fresh connection.
	a, b = e.pair(t)
	e.bind(t, b, &win)
	key = mw.RKey()
	if s := e.write(t, a, win.Addr, key); s != cq.Success {
		t.Fatalf("rebound window: %v", s)
	}
	e.keep()
	if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 4, SGL: []uverbs.SGE{rdmatest.SGE(t, e.src, 1024, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 5, Opcode: uverbs.WRSendWithInv, Flags: uverbs.SendSignaled,
		Imm: key, SGL: []uverbs.SGE{rdmatest.SGE(t, e.src, 0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	for _, w := range rdmatest.PollN(t, e.cq, 2) {
		switch {
		case w.Status != cq.Success:
			t.Fatalf("send with invalidate: %+v (%v)", w, w.Status)
		case w.WRID == 4 && (w.Flags&cq.WithInv == 0 || w.Imm != key):
			t.Errorf("receive of a send with invalidate: %+v, want WithInv and the key %#x", w, key)
		}
	}
	if s := e.write(t, a, win.Addr, key); s != cq.RemAccessErr {
		t.Errorf("after the peer's invalidate: %v, want %v", s, cq.RemAccessErr)
	}
	unchanged("after the peer's invalidate")
	// The receive's WithInv told goverbs: invalidating it again here is
	// refused, not handed to the kernel.
	_, b = e.pair(t)
	if _, err := b.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRLocalInv, Bind: &uverbs.MWBind{MW: mw}}}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("invalidating a window the peer invalidated: %v, want EINVAL", err)
	}

	// A window outside its MR, or with rights the MR cannot back, is
	// refused at post, and the QP stays up.
	for _, bad := range []uverbs.MWBind{
		{MW: mw, MR: e.mr, Addr: e.mr.Addr() + uint64(len(e.mem)) - 8, Length: 16, Access: uverbs.AccessRemoteRead},
		{MW: mw, MR: e.src, Addr: e.src.Addr(), Length: 16, Access: uverbs.AccessRemoteRead},
		{MW: mw, Length: 16},
	} {
		if _, err := b.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRBindMW, Bind: &bad}}); !errors.Is(err, unix.EINVAL) {
			t.Errorf("bind %+v: %v, want EINVAL", bad, err)
		}
	}
	e.bind(t, b, &win) // still up
	if _, err := b.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRBindMW, Bind: &win}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("binding a bound type-2 window: %v, want EINVAL", err)
	}
	// rxe counts an MR's bound windows and refuses its deregistration;
	// mlx5's kernel does not know of binds, which the device executes.
	if err := e.mr.Close(); rdmatest.Provider(t) == "rxe" && !errors.Is(err, unix.EINVAL) {
		t.Errorf("dereg of an MR with a bound window: %v, want EINVAL", err)
	}
}

// TestMemoryWindowRange: an access through a window outside its range
// but inside its MR fails on mlx5 (and the model), and succeeds on rxe,
// whose responder checks the MR's range only (6.1 and 6.12, as
// mainline; docs/MEMORY.md).
func TestMemoryWindowRange(t *testing.T) {
	e := newMWEnv(t)
	mw, err := e.pd.AllocMW(uverbs.MWType2)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	a, b := e.pair(t)
	e.bind(t, b, &uverbs.MWBind{MW: mw, MR: e.mr, Addr: e.mr.Addr() + 4096, Length: 4096, Access: uverbs.AccessRemoteWrite})
	e.keep()
	s := e.write(t, a, e.mr.Addr()+8192, mw.RKey()) // just past the window
	if rdmatest.Provider(t) == "rxe" {
		if s != cq.Success {
			t.Errorf("rxe: a write past the window, inside the MR: %v; rxe used to let it through (update docs/MEMORY.md)", s)
		}
		return
	}
	if s != cq.RemAccessErr {
		t.Errorf("a write past the window: %v, want %v", s, cq.RemAccessErr)
	}
	if !bytes.Equal(e.mem, e.kept) {
		t.Error("the memory changed")
	}
}

// keep keeps the memory as it is now, as it should stay.
func (e *mwEnv) keep() { e.kept = bytes.Clone(e.mem) }

// TestMemoryWindowType1 binds a type-1 window: any QP of the PD serves
// it, and an unbind closes it.
func TestMemoryWindowType1(t *testing.T) {
	e := newMWEnv(t)
	mw, err := e.pd.AllocMW(uverbs.MWType1)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	a, b := e.pair(t)
	e.bind(t, b, &uverbs.MWBind{MW: mw, MR: e.mr, Addr: e.mr.Addr(), Length: 8192, Access: uverbs.AccessRemoteWrite})
	if s := e.write(t, a, e.mr.Addr()+8, mw.RKey()); s != cq.Success {
		t.Fatalf("through the window: %v", s)
	}
	c, _ := e.pair(t) // another connection of the PD
	if s := e.write(t, c, e.mr.Addr()+40, mw.RKey()); s != cq.Success {
		t.Fatalf("through the window, another connection: %v", s)
	}
	if !bytes.Equal(e.mem[40:64], e.srcMe[:24]) {
		t.Errorf("wrote %q", e.mem[40:64])
	}
	e.bind(t, b, &uverbs.MWBind{MW: mw}) // unbind
	e.keep()
	if s := e.write(t, a, e.mr.Addr()+8, mw.RKey()); s != cq.RemAccessErr {
		t.Errorf("after the unbind: %v, want %v", s, cq.RemAccessErr)
	}
	if !bytes.Equal(e.mem, e.kept) {
		t.Error("the memory changed after the unbind")
	}
}

// TestMemoryWindowPostAllocs: binding and invalidating through the post
// path allocates nothing.
func TestMemoryWindowPostAllocs(t *testing.T) {
	e := newMWEnv(t)
	mw, err := e.pd.AllocMW(uverbs.MWType2)
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	_, b := e.pair(t)
	bind := &uverbs.MWBind{MW: mw, MR: e.mr, Addr: e.mr.Addr(), Length: 64, Access: uverbs.AccessRemoteRead}
	wrs := []uverbs.SendWR{{Opcode: uverbs.WRBindMW, Flags: uverbs.SendSignaled, Bind: bind},
		{Opcode: uverbs.WRLocalInv, Flags: uverbs.SendSignaled, Bind: &uverbs.MWBind{MW: mw}}}
	wcs := make([]cq.WC, 2)
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := b.PostSend(wrs[:1]); err != nil {
			t.Fatal(err)
		}
		if _, err := b.PostSend(wrs[1:]); err != nil {
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
		t.Errorf("bind and invalidate: %.1f allocations, want 0", allocs)
	}
}

// TestRegMRAt registers memory zero-based: a peer names it by offsets.
func TestRegMRAt(t *testing.T) {
	e := newQPEnv(t)
	buf, err := uverbs.AllocBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mem := buf.Bytes()
	if _, err := e.pd.RegMRAt(mem[1:], 0, uverbs.AccessLocalWrite); !errors.Is(err, unix.EINVAL) {
		t.Errorf("iova at another page offset: %v, want EINVAL", err)
	}
	mr, err := e.pd.RegMRAt(mem[:4096], 0, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	if mr.Addr() != 0 {
		t.Errorf("Addr %#x, want 0", mr.Addr())
	}
	src, err := e.pd.RegMRAt(mem[4096:], 1<<40, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	copy(mem[4096:], "zero-based")
	a, b := e.qp(t, uverbs.RC), e.qp(t, uverbs.RC)
	rdmatest.ConnectRC(t, a, b)
	if _, err := a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, src, 0, 10)}, RemoteAddr: 128, RKey: mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if w := rdmatest.PollN(t, e.cq, 1)[0]; w.Status != cq.Success {
		t.Fatalf("write at offset 128: %v", w.Status)
	}
	if string(mem[128:138]) != "zero-based" {
		t.Errorf("offset 128 holds %q", mem[128:138])
	}
}

// TestMRRereg changes a region's rights in place where the kernel can
// (rxe from 6.12) and fails clearly where it cannot (6.1).
func TestMRRereg(t *testing.T) {
	e := newQPEnv(t)
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := e.pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	if err := mr.Rereg(0, nil, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("no change: %v, want EINVAL", err)
	}
	err = mr.Rereg(uverbs.ReregAccess, nil, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	release := testutil.KernelRelease(t)
	old := rdmatest.Provider(t) == "rxe" && !testutil.KernelAtLeast(t, 6, 12)
	switch {
	case old && !errors.Is(err, uverbs.ErrNotSupported):
		t.Fatalf("rereg on rxe, kernel %s: %v, want ErrNotSupported", release, err)
	case old:
		t.Logf("kernel %s: %v", release, err)
		return
	case err != nil:
		t.Fatalf("rereg, kernel %s: %v", release, err)
	}
	a, b := e.qp(t, uverbs.RC), e.qp(t, uverbs.RC)
	rdmatest.ConnectRC(t, a, b)
	copy(buf.Bytes()[2048:], "reregistered")
	if _, err := a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 2048, 12)}, RemoteAddr: mr.Addr(), RKey: mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	if w := rdmatest.PollN(t, e.cq, 1)[0]; w.Status != cq.Success {
		t.Fatalf("write with the new rights: %v", w.Status)
	}
	if string(buf.Bytes()[:12]) != "reregistered" {
		t.Errorf("wrote %q", buf.Bytes()[:12])
	}
}
