package uverbs

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Buffer is page-aligned memory outside the Go heap, for RDMA: the
// device may read and write it at any time while it is registered, so it
// must not move, and the garbage collector must not scan it. It is
// marked MADV_DONTFORK, so a fork (os/exec) does not break registrations.
//
// Close unmaps it, and refuses while an MR is registered over it; do not
// touch the slice afterwards. Buffer is safe for concurrent use; the
// bytes are the caller's to synchronise.
type Buffer struct {
	mu  sync.Mutex
	mem []byte // guarded by mu: nil once closed
	b   []byte // the length asked for

	mrs map[*MR]struct{} // guarded by buffersMu: the MRs registered over it
}

// buffersMu guards buffers and every Buffer's mrs. Lock order: a
// Buffer's mu, then buffersMu.
var (
	buffersMu sync.Mutex
	buffers   = map[*Buffer]struct{}{} // the mapped Buffers
)

// bufferOf returns the mapped Buffer holding the address addr, or nil;
// the caller holds buffersMu.
func bufferOf(addr uintptr) *Buffer {
	for b := range buffers {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(b.mem)))
		if addr >= base && addr-base < uintptr(len(b.mem)) {
			return b
		}
	}
	return nil
}

// holdBuffer records m as registered over the Buffer its memory lies in,
// if any, so that the Buffer is not unmapped under it. RegMR calls it
// before the registration; releaseBuffer undoes it.
func (m *MR) holdBuffer() {
	buffersMu.Lock()
	defer buffersMu.Unlock()
	if b := bufferOf(uintptr(unsafe.Pointer(unsafe.SliceData(m.mem)))); b != nil {
		b.mrs[m] = struct{}{}
		m.buf = b
	}
}

func (m *MR) releaseBuffer() {
	buffersMu.Lock()
	defer buffersMu.Unlock()
	if m.buf != nil {
		delete(m.buf.mrs, m)
		m.buf = nil
	}
}

// AllocBuffer maps n bytes (rounded up to whole pages) of zeroed memory
// outside the Go heap.
func AllocBuffer(n int) (*Buffer, error) {
	if n <= 0 {
		return nil, &OpError{Op: "alloc buffer", Err: fmt.Errorf("size %d: %w", n, unix.EINVAL)}
	}
	page := unix.Getpagesize()
	size := (n + page - 1) &^ (page - 1)
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, &OpError{Op: "alloc buffer", Err: fmt.Errorf("mmap %d bytes: %w", size, err)}
	}
	if err := unix.Madvise(mem, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(mem)
		return nil, &OpError{Op: "alloc buffer", Err: fmt.Errorf("madvise DONTFORK: %w", err)}
	}
	b := &Buffer{mem: mem, b: mem[:n], mrs: map[*MR]struct{}{}}
	buffersMu.Lock()
	buffers[b] = struct{}{}
	buffersMu.Unlock()
	return b, nil
}

// Bytes returns the buffer's memory, of the length asked for; nil after Close.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return nil
	}
	return b.b
}

// Close unmaps the buffer. While MRs are registered over it, it leaves
// the buffer mapped and returns an error wrapping EBUSY that names the
// device and says how many: close them first (an MR whose Context is
// closed no longer counts). A second Close returns an error wrapping
// ErrClosed.
func (b *Buffer) Close() error {
	const op = "free buffer"
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return &OpError{Op: op, Err: ErrClosed}
	}
	buffersMu.Lock()
	var dev string
	for m := range b.mrs {
		if m.pd.ctx.closed.Load() { // the kernel deregistered it with its context
			delete(b.mrs, m)
			m.buf = nil
		} else if dev == "" {
			dev = m.pd.ctx.dev.Name
		}
	}
	if n := len(b.mrs); n > 0 {
		buffersMu.Unlock()
		what := "memory regions are"
		if n == 1 {
			what = "memory region is"
		}
		return &OpError{Op: op, Device: dev, Err: fmt.Errorf("%d %s registered over it (close them first): %w", n, what, unix.EBUSY)}
	}
	delete(buffers, b)
	buffersMu.Unlock()
	err := unix.Munmap(b.mem)
	b.mem, b.b = nil, nil
	if err != nil {
		return &OpError{Op: op, Err: err}
	}
	return nil
}
