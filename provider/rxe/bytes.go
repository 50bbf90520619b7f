package rxe

import "unsafe"

// bytesOf views a driver struct as bytes, for the kernel to fill in.
func bytesOf[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}
