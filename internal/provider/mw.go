package provider

import (
	"sync"
	"sync/atomic"
)

// MWRef is a memory window as the providers see it: its type, its
// current rkey, which a posted bind advances (the kernel's window takes
// the new key's low 8 bits when it executes the bind), and for a type-2
// window whether a bind was posted since the last invalidation.
type MWRef struct {
	RKey  atomic.Uint32
	Bound atomic.Bool
	Type  uint8
}

// NextRKey is the key a bind gives a window whose key is k: the low 8
// bits (the part the consumer owns) advanced by one, as ibv_inc_rkey.
func NextRKey(k uint32) uint32 { return k&^0xff | (k+1)&0xff }

// windows are the process's type-2 windows by index (the upper 24 bits of
// the rkey), for the CQs to mark a window a peer invalidated (a receive
// completion with WithInv) as unbound. A map under a lock, not a
// sync.Map, so that the lookup boxes no key on the poll path.
var windows struct {
	sync.RWMutex
	m map[uint32]*MWRef
}

// AddWindow registers a type-2 window, DropWindow forgets it.
func AddWindow(w *MWRef) {
	windows.Lock()
	if windows.m == nil {
		windows.m = make(map[uint32]*MWRef)
	}
	windows.m[w.RKey.Load()>>8] = w
	windows.Unlock()
}

// DropWindow forgets a window AddWindow registered.
func DropWindow(w *MWRef) {
	windows.Lock()
	if k := w.RKey.Load() >> 8; windows.m[k] == w {
		delete(windows.m, k)
	}
	windows.Unlock()
}

// PeerInvalidated marks unbound the window whose key a peer's send with
// invalidate named, if it is one of the process's with that very key.
// Devices share the index space here: a match on another device's
// window only makes a later local invalidation refused, never allowed.
func PeerInvalidated(rkey uint32) {
	windows.RLock()
	w := windows.m[rkey>>8]
	windows.RUnlock()
	if w != nil && w.RKey.Load() == rkey {
		w.Bound.Store(false)
	}
}
