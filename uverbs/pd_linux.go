package uverbs

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
)

// PD is a protection domain (ibv_pd). It holds its Context alive.
// Safe for concurrent use.
type PD struct {
	ctx    *Context
	handle uint32

	mu     sync.Mutex
	closed bool // guarded by mu
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (c *Context) AllocPD() (*PD, error) {
	if err := c.use("alloc pd"); err != nil {
		return nil, err
	}
	defer c.done()
	h, err := kverbs.AllocPD(c.conn)
	if err != nil {
		return nil, c.opErr("alloc pd", err)
	}
	return &PD{ctx: c, handle: h}, nil
}

// use checks that the PD is open and takes a use of its context (see
// Context.use) for op, which the caller ends with p.ctx.done().
func (p *PD) use(op string) error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return p.ctx.opErr(op, fmt.Errorf("pd: %w", ErrClosed))
	}
	return p.ctx.use(op)
}

// Context returns the context the PD belongs to.
func (p *PD) Context() *Context { return p.ctx }

// Close deallocates the PD (ibv_dealloc_pd). It fails with EBUSY while
// MRs, QPs or AHs still use it. A second Close returns ErrClosed.
func (p *PD) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return p.ctx.opErr("dealloc pd", ErrClosed)
	}
	if err := p.ctx.use("dealloc pd"); err != nil {
		return err
	}
	defer p.ctx.done()
	if err := kverbs.DeallocPD(p.ctx.conn, p.handle); err != nil {
		return p.ctx.opErr("dealloc pd", err)
	}
	p.closed = true
	return nil
}

// MR is a registered memory region (ibv_mr): memory the device may access
// with its keys. It holds its PD and its memory alive.
type MR struct {
	ref    provider.MRRef // first: a *MR is the provider's *provider.MRRef (MWBind)
	pd     *PD
	handle uint32
	mem    []byte  // keeps Go-heap memory alive and unmoved while registered
	buf    *Buffer // the Buffer mem lies in, if any; guarded by buffersMu

	mu     sync.Mutex
	closed bool // guarded by mu
}

// RegMR registers mem for the device (ibv_reg_mr), at I/O virtual
// address equal to its address. mem should come from AllocBuffer; Go-heap
// memory also works under the rules in docs/MEMORY.md: the MR keeps it
// alive, and the Go heap does not move it.
func (p *PD) RegMR(mem []byte, access Access) (*MR, error) {
	return p.regMR("reg mr", mem, uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))), access)
}

// RegMRAt registers mem as RegMR does, but at I/O virtual address iova
// (ibv_reg_mr_iova): local SGEs and a peer's RDMA requests name its
// bytes from iova on, so an iova of 0 makes the region zero-based and a
// peer learns offsets, never this process's addresses. The kernel takes
// an iova only at the same offset in its 4 KiB page as mem (EINVAL
// otherwise): AllocBuffer's memory with an iova of 0, or any multiple of
// 4096, always fits.
func (p *PD) RegMRAt(mem []byte, iova uint64, access Access) (*MR, error) {
	return p.regMR("reg mr iova", mem, iova, access)
}

func (p *PD) regMR(op string, mem []byte, iova uint64, access Access) (*MR, error) {
	if len(mem) == 0 {
		return nil, p.ctx.opErr(op, fmt.Errorf("empty memory: %w", unix.EINVAL))
	}
	base := unsafe.Pointer(unsafe.SliceData(mem))
	addr := uint64(uintptr(base))
	if (addr^iova)&4095 != 0 {
		return nil, p.ctx.opErr(op, fmt.Errorf("iova %#x is not at the offset in its page of the memory at %#x: %w", iova, addr, unix.EINVAL))
	}
	if err := p.use(op); err != nil {
		return nil, err
	}
	defer p.ctx.done()
	if err := p.ctx.checkFlushAccess(access); err != nil {
		return nil, p.ctx.opErr(op, err)
	}
	m := &MR{pd: p, mem: mem}
	m.holdBuffer() // before the registration: the Buffer stays mapped under it
	r, err := kverbs.RegMR(p.ctx.conn, p.handle, base, uint64(len(mem)), iova, uint32(access))
	runtime.KeepAlive(mem)
	if err != nil {
		m.releaseBuffer()
		if access&AccessFlushPersistent != 0 && errors.Is(err, unix.EINVAL) {
			err = fmt.Errorf("%w (AccessFlushPersistent needs persistent memory (pmem) pages)", err)
		}
		return nil, p.ctx.opErr(op, fmt.Errorf("%d bytes at %#x, access %#x: %w", len(mem), addr, uint32(access), memlockHint(err)))
	}
	m.handle = r.Handle
	m.ref = provider.MRRef{LKey: r.LKey, RKey: r.RKey, IOVA: iova, Length: uint64(len(mem)), Access: uint32(access)}
	return m, nil
}

// memlockHint explains a registration the kernel refused for pinning
// more than RLIMIT_MEMLOCK allows: ENOMEM when the process's pinned
// memory would pass the limit, EPERM when the limit is 0 (ib_umem_get,
// for a process without CAP_IPC_LOCK). Other errors pass unchanged.
func memlockHint(err error) error {
	if !errors.Is(err, unix.ENOMEM) && !errors.Is(err, unix.EPERM) {
		return err
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) != nil || lim.Cur == unix.RLIM_INFINITY {
		return err
	}
	return fmt.Errorf("%w (RLIMIT_MEMLOCK is %d bytes, and every MR of the process counts against it: "+
		"raise it with ulimit -l, LimitMEMLOCK= in a systemd unit or --ulimit memlock= in docker, "+
		"or grant CAP_IPC_LOCK)", err, lim.Cur)
}

// LKey returns the local key, for scatter/gather entries.
func (m *MR) LKey() uint32 { return m.ref.LKey }

// RKey returns the remote key, for a peer's RDMA read, write and atomics.
func (m *MR) RKey() uint32 { return m.ref.RKey }

// Addr returns the I/O virtual address of the registered memory's first
// byte: the address SGEs and a peer's requests name it by. For RegMR it
// is the memory's own address; for RegMRAt, the iova given.
func (m *MR) Addr() uint64 { return m.ref.IOVA }

// Bytes returns the registered memory.
func (m *MR) Bytes() []byte { return m.mem }

// PD returns the protection domain of the MR.
func (m *MR) PD() *PD { return m.pd }

// Rereg changes the MR in place (ibv_rereg_mr): with ReregPD it moves to
// pd, with ReregAccess its rights become access; its keys may change
// (rxe keeps them). Not every kernel can: rxe gained it after 6.1, where
// the error wraps ErrNotSupported and names the kernel.
func (m *MR) Rereg(change ReregFlags, pd *PD, access Access) error {
	const op = "rereg mr"
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx := m.pd.ctx
	switch {
	case m.closed:
		return ctx.opErr(op, ErrClosed)
	case change == 0 || change&^(ReregPD|ReregAccess) != 0:
		return ctx.opErr(op, fmt.Errorf("change %#x: %w", uint32(change), unix.EINVAL))
	case change&ReregPD != 0 && (pd == nil || pd.ctx != ctx):
		return ctx.opErr(op, fmt.Errorf("a PD of the MR's context is needed: %w", unix.EINVAL))
	}
	pdHandle := m.pd.handle
	if change&ReregPD != 0 {
		pdHandle = pd.handle
	}
	if err := ctx.use(op); err != nil {
		return err
	}
	defer ctx.done()
	lkey, rkey, err := kverbs.ReregMR(ctx.conn, m.handle, uint32(change), pdHandle, nil, 0, 0, uint32(access))
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			// rxe has no rereg_user_mr on 6.1; 6.12's takes PD and access.
			err = errs.NewUnsupported("rxe memory region re-registration (rereg_mr)", "6.12", err)
		}
		return ctx.opErr(op, err)
	}
	if change&ReregPD != 0 {
		m.pd = pd
	}
	if change&ReregAccess != 0 {
		m.ref.Access = uint32(access)
	}
	m.ref.LKey, m.ref.RKey = lkey, rkey
	return nil
}

// Close deregisters the MR (ibv_dereg_mr). It fails with EINVAL while a
// memory window is bound to it. A second Close returns ErrClosed.
func (m *MR) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx := m.pd.ctx
	if m.closed {
		return ctx.opErr("dereg mr", ErrClosed)
	}
	if err := ctx.use("dereg mr"); err != nil {
		m.releaseBuffer() // the context's close deregistered it in the kernel
		return err
	}
	defer ctx.done()
	if err := kverbs.DeregMR(ctx.conn, m.handle); err != nil {
		return ctx.opErr("dereg mr", err)
	}
	m.closed = true
	m.releaseBuffer()
	return nil
}

// MW is a memory window (ibv_mw): a remote key for part of an MR, which a
// bind opens to a peer (SendWR with WRBindMW and an MWBind) and an
// invalidation closes, while the MR stays registered. It holds its PD
// alive. Safe for concurrent use.
type MW struct {
	ref    provider.MWRef // first: a *MW is the provider's *provider.MWRef (MWBind)
	pd     *PD
	handle uint32

	mu     sync.Mutex
	closed bool // guarded by mu
}

// AllocMW allocates a memory window of type t (ibv_alloc_mw), unbound.
// Devices without windows answer with an error wrapping EOPNOTSUPP
// (DeviceAttr.MaxMW is 0 there).
func (p *PD) AllocMW(t MWType) (*MW, error) {
	const op = "alloc mw"
	if t != MWType1 && t != MWType2 {
		return nil, p.ctx.opErr(op, fmt.Errorf("window type %d: %w", t, unix.EINVAL))
	}
	if err := p.use(op); err != nil {
		return nil, err
	}
	defer p.ctx.done()
	h, rkey, err := kverbs.AllocMW(p.ctx.conn, p.handle, uint8(t))
	if err != nil {
		return nil, p.ctx.opErr(op, fmt.Errorf("type %d: %w", t, err))
	}
	w := &MW{pd: p, handle: h}
	w.ref.Type = uint8(t)
	w.ref.RKey.Store(rkey)
	if t == MWType2 {
		provider.AddWindow(&w.ref)
	}
	return w, nil
}

// RKey returns the window's remote key: as allocated, then as the last
// bind posted made it. The kernel's window takes a key when it executes
// the bind; a bind that completes in error leaves it with the old one.
func (w *MW) RKey() uint32 { return w.ref.RKey.Load() }

// Type returns the window's type.
func (w *MW) Type() MWType { return MWType(w.ref.Type) }

// PD returns the protection domain of the window.
func (w *MW) PD() *PD { return w.pd }

// Close deallocates the window (ibv_dealloc_mw), bound or not: a peer's
// access with its key fails from then on, and its MR may be deregistered.
// Close a type-2 window before the QP it is bound to: rxe waits for the
// window's hold on the QP when the QP is destroyed. A second Close
// returns ErrClosed.
func (w *MW) Close() error {
	const op = "dealloc mw"
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx := w.pd.ctx
	if w.closed {
		return ctx.opErr(op, ErrClosed)
	}
	if err := ctx.use(op); err != nil {
		provider.DropWindow(&w.ref) // the context's close deallocated it
		return err
	}
	defer ctx.done()
	if err := kverbs.DeallocMW(ctx.conn, w.handle); err != nil {
		return ctx.opErr(op, err)
	}
	w.closed = true
	provider.DropWindow(&w.ref)
	return nil
}
