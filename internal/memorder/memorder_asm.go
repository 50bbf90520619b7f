//go:build (amd64 || arm64) && !race

package memorder

// StoreRelease32 stores v at p with release order: every load and store
// before it is visible to another CPU (or the kernel, or a device reading
// coherent memory) before v is.
//
//go:noescape
func StoreRelease32(p *uint32, v uint32)
