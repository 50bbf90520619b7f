package mlx5model

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/goverbs/goverbs/uapi"
)

// Memory the model touches on the application's behalf (rings, doorbell
// records, registered buffers, command payloads) is reached only from a
// pointer it was given (a uapi.Pointer in a command, the command itself)
// plus an offset with unsafe.Add, never from an integer turned into a
// pointer: so the garbage collector and -d=checkptr (on under -race) see
// every derived pointer inside the allocation it came from.

var be = binary.BigEndian

// pointerField is where uapi.Pointer keeps its unsafe.Pointer: at 0 on
// 64-bit and little-endian 32-bit machines, after the pad on big-endian
// 32-bit ones. Found once, by looking.
var pointerField = func() uintptr {
	var probe byte
	p := uapi.NewPointer(unsafe.Pointer(&probe))
	for off := uintptr(0); off+unsafe.Sizeof(uintptr(0)) <= unsafe.Sizeof(p); off += 4 {
		if *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(&p), off)) == unsafe.Pointer(&probe) {
			return off
		}
	}
	panic("mlx5model: cannot find the pointer in uapi.Pointer")
}()

// ptrOf returns the address a uapi.Pointer field holds (its bits, however
// they were written: the command buffers are copies of the caller's
// structs).
func ptrOf(p *uapi.Pointer) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Add(unsafe.Pointer(p), pointerField))
}

// bytesAt views n bytes at p.
func bytesAt(p unsafe.Pointer, n int) []byte { return unsafe.Slice((*byte)(p), n) }

// load32BE reads a big-endian 32-bit word the application writes
// concurrently (a doorbell record), with an atomic load.
func load32BE(p unsafe.Pointer) uint32 {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], atomic.LoadUint32((*uint32)(p)))
	return be.Uint32(b[:])
}

// store32BE writes a big-endian 32-bit word with a release store.
func store32BE(p unsafe.Pointer, v uint32) {
	var b [4]byte
	be.PutUint32(b[:], v)
	atomic.StoreUint32((*uint32)(p), binary.NativeEndian.Uint32(b[:]))
}

// doorbell is the 8 bytes of a UAR doorbell register, in memory order.
type doorbell [8]byte

// takeDoorbell consumes the doorbell at p: if it holds a value, it is
// swapped back to zero and returned; ok is false when it held none or the
// application wrote again meanwhile (the next scan sees that).
func takeDoorbell(p unsafe.Pointer) (d doorbell, ok bool) {
	w := (*uint64)(p)
	v := atomic.LoadUint64(w)
	if v == 0 || !atomic.CompareAndSwapUint64(w, v, 0) {
		return d, false
	}
	binary.NativeEndian.PutUint64(d[:], v)
	return d, true
}

func (d doorbell) hi() uint32 { return be.Uint32(d[0:]) }
func (d doorbell) lo() uint32 { return be.Uint32(d[4:]) }
