//go:build (!amd64 && !arm64) || race

package memorder

import "sync/atomic"

// StoreRelease32 stores v at p with release order: every load and store
// before it is visible to another CPU (or the kernel, or a device reading
// coherent memory) before v is. Here, and in race-detector builds (which
// must see the store as a synchronizing one), it is sync/atomic's Store,
// sequentially consistent: more than enough.
func StoreRelease32(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
