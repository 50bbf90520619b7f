//go:build !(amd64 || 386) || race

package release

import "sync/atomic"

// Store32 stores v at p with release ordering: sync/atomic's Store, a
// release store or stronger on every architecture.
func Store32(p *atomic.Uint32, v uint32) { p.Store(v) }
