package uapi

import "unsafe"

// NewPointer returns the Pointer that holds p.
func NewPointer(p unsafe.Pointer) Pointer { return Pointer{ptr: p} }

var _ [0]struct{} = [unsafe.Sizeof(Pointer{}) - 8]struct{}{} // compiles only at exactly 8 bytes
