package mlx5

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dmaBuf is memory the device reads and writes: page-aligned, outside the
// Go heap (the kernel pins it, and the Go runtime must never move or reuse
// it), zeroed, and not inherited by a forked child (MADV_DONTFORK), whose
// copy-on-write would split it from the pinned pages.
type dmaBuf []byte

func allocDMA(n int) (dmaBuf, error) {
	page := unix.Getpagesize()
	n = (n + page - 1) &^ (page - 1)
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("allocate %d bytes of queue memory: %w", n, err)
	}
	if err := unix.Madvise(b, unix.MADV_DONTFORK); err != nil {
		unix.Munmap(b)
		return nil, fmt.Errorf("madvise(MADV_DONTFORK): %w", err)
	}
	return b, nil
}

func (b dmaBuf) free() {
	if b != nil {
		unix.Munmap(b)
	}
}

func (b dmaBuf) ptr() unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// dbPool hands out 64-byte doorbell records carved from DMA pages: the
// kernel pins the page under each record it is given.
type dbPool struct {
	mu    sync.Mutex
	pages []dmaBuf
	free  []unsafe.Pointer
}

func (p *dbPool) get() (unsafe.Pointer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 {
		b, err := allocDMA(unix.Getpagesize())
		if err != nil {
			return nil, err
		}
		p.pages = append(p.pages, b)
		for off := len(b) - dbrecSize; off >= 0; off -= dbrecSize {
			p.free = append(p.free, unsafe.Pointer(&b[off]))
		}
	}
	r := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	clear(unsafe.Slice((*byte)(r), dbrecSize))
	return r, nil
}

func (p *dbPool) put(r unsafe.Pointer) {
	p.mu.Lock()
	p.free = append(p.free, r)
	p.mu.Unlock()
}

// release unmaps every page: the context is closed.
func (p *dbPool) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.pages {
		b.free()
	}
	p.pages, p.free = nil, nil
}
