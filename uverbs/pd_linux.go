package uverbs

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
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
	pd         *PD
	handle     uint32
	lkey, rkey uint32
	mem        []byte // keeps Go-heap memory alive and unmoved while registered
	access     Access
	buf        *Buffer // the Buffer mem lies in, if any; guarded by buffersMu

	mu     sync.Mutex
	closed bool // guarded by mu
}

// RegMR registers mem for the device (ibv_reg_mr), at I/O virtual
// address equal to its address. mem should come from AllocBuffer; Go-heap
// memory also works under the rules in docs/MEMORY.md: the MR keeps it
// alive, and the Go heap does not move it.
func (p *PD) RegMR(mem []byte, access Access) (*MR, error) {
	const op = "reg mr"
	if len(mem) == 0 {
		return nil, p.ctx.opErr(op, fmt.Errorf("empty memory: %w", unix.EINVAL))
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, p.ctx.opErr(op, fmt.Errorf("pd: %w", ErrClosed))
	}
	if err := p.ctx.use(op); err != nil {
		return nil, err
	}
	defer p.ctx.done()
	m := &MR{pd: p, mem: mem, access: access}
	m.holdBuffer() // before the registration: the Buffer stays mapped under it
	base := unsafe.Pointer(unsafe.SliceData(mem))
	addr := uint64(uintptr(base))
	r, err := kverbs.RegMR(p.ctx.conn, p.handle, base, uint64(len(mem)), addr, uint32(access))
	runtime.KeepAlive(mem)
	if err != nil {
		m.releaseBuffer()
		return nil, p.ctx.opErr(op, fmt.Errorf("%d bytes at %#x, access %#x: %w", len(mem), addr, uint32(access), memlockHint(err)))
	}
	m.handle, m.lkey, m.rkey = r.Handle, r.LKey, r.RKey
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
func (m *MR) LKey() uint32 { return m.lkey }

// RKey returns the remote key, for a peer's RDMA read, write and atomics.
func (m *MR) RKey() uint32 { return m.rkey }

// Addr returns the address of the registered memory (its I/O virtual address).
func (m *MR) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(m.mem)))) }

// Bytes returns the registered memory.
func (m *MR) Bytes() []byte { return m.mem }

// PD returns the protection domain of the MR.
func (m *MR) PD() *PD { return m.pd }

// Close deregisters the MR (ibv_dereg_mr). A second Close returns ErrClosed.
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
