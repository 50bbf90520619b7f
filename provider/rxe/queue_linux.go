package rxe

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// queue is a mapped struct rxe_queue_buf: the ring the kernel shares with
// user space for a CQ, SQ or RQ. Its memory is coherent CPU memory, so
// CPU ordering is all it needs: the consumer acquire-loads the producer
// index (sync/atomic), copies the slot, and release-stores its own index
// (internal/release: a plain MOV on x86, no locked instruction); the
// producer the reverse. Indices are kept masked, in [0, mask].
type queue struct {
	mem  []byte // the mapping; unmap releases it, nothing else does
	prod *atomic.Uint32
	cons *atomic.Uint32
	data unsafe.Pointer // slot 0
	step uintptr        // the slot size, a power of two (see slot)
	mask uint32         // slots - 1
}

// mapQueue maps a queue from the mmap info the kernel gave at create. The
// offset is a one-shot cookie: a second mmap of it fails.
func mapQueue(fd int, mi uapi.Mminfo, minSlot uintptr) (*queue, error) {
	hdr := unsafe.Sizeof(uapi.RxeQueueBuf{})
	if mi.Size < uint32(hdr) {
		return nil, fmt.Errorf("queue of %d bytes is smaller than its %d-byte header", mi.Size, hdr)
	}
	mem, err := unix.Mmap(fd, int64(mi.Offset), int(mi.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap queue (offset %#x, %d bytes): %w", mi.Offset, mi.Size, err)
	}
	q, err := newQueue(mem, minSlot)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	return q, nil
}

// newQueue reads and checks the header of a queue mapped at mem (8-byte
// aligned): the slots it describes must fit mem. The fuzz tests call it
// on Go memory.
func newQueue(mem []byte, minSlot uintptr) (*queue, error) {
	hdr := unsafe.Sizeof(uapi.RxeQueueBuf{})
	if uintptr(len(mem)) < hdr {
		return nil, fmt.Errorf("queue of %d bytes is smaller than its %d-byte header", len(mem), hdr)
	}
	// The header is host-endian and 384-byte aligned within a page-aligned
	// mapping: a struct overlay is fine.
	base := unsafe.Pointer(unsafe.SliceData(mem))
	h := (*uapi.RxeQueueBuf)(base)
	shift, mask := h.Log2ElemSize, h.IndexMask
	slots := uint64(mask) + 1
	switch {
	case shift > 20 || uintptr(1)<<shift < minSlot:
		return nil, fmt.Errorf("queue slot of 2^%d bytes, want at least %d", shift, minSlot)
	case slots&(slots-1) != 0:
		return nil, fmt.Errorf("queue index mask %#x is not 2^n-1", mask)
	case uint64(hdr)+slots<<shift > uint64(len(mem)):
		return nil, fmt.Errorf("%d slots of %d bytes do not fit the %d-byte mapping", slots, 1<<shift, len(mem))
	}
	return &queue{
		mem:  mem,
		prod: (*atomic.Uint32)(unsafe.Pointer(&h.ProducerIndex)),
		cons: (*atomic.Uint32)(unsafe.Pointer(&h.ConsumerIndex)),
		data: unsafe.Add(base, hdr),
		step: uintptr(1) << shift,
		mask: mask,
	}, nil
}

// slot returns the address of slot i (masked). A multiply by step, not
// a shift by its log2: Go defines shifts by 64 or more, so a shift by a
// variable count carries a check for them.
func (q *queue) slot(i uint32) unsafe.Pointer {
	return unsafe.Add(q.data, uintptr(i&q.mask)*q.step)
}

// slotSize returns the size of a slot in bytes.
func (q *queue) slotSize() uintptr { return q.step }

// size returns how many entries the queue holds (one slot stays empty).
func (q *queue) size() int { return int(q.mask) }

// unmap releases the mapping; the queue must not be used afterwards.
func (q *queue) unmap() error {
	if q.mem == nil {
		return nil
	}
	err := unix.Munmap(q.mem)
	q.mem, q.data = nil, nil
	return err
}
