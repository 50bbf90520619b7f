// Package good builds everywhere: its fence is assembly on amd64 and
// arm64, Go elsewhere.
package good

// Size is a uintptr's size in bytes.
const Size = 4 << (^uintptr(0) >> 63)
