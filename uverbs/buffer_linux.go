package uverbs

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Buffer is page-aligned memory outside the Go heap, for RDMA: the
// device may read and write it at any time while it is registered, so it
// must not move, and the garbage collector must not scan it. It is
// marked MADV_DONTFORK, so a fork (os/exec) does not break registrations.
//
// Close unmaps it; deregister every MR over it first, and do not touch
// the slice afterwards. Buffer is safe for concurrent use; the bytes are
// the caller's to synchronise.
type Buffer struct {
	mu  sync.Mutex
	mem []byte // guarded by mu: nil once closed
	b   []byte // the length asked for
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
	return &Buffer{mem: mem, b: mem[:n]}, nil
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

// Close unmaps the buffer. A second Close returns an error wrapping ErrClosed.
func (b *Buffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem == nil {
		return &OpError{Op: "free buffer", Err: ErrClosed}
	}
	err := unix.Munmap(b.mem)
	b.mem, b.b = nil, nil
	if err != nil {
		return &OpError{Op: "free buffer", Err: err}
	}
	return nil
}
