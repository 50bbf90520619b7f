// Package memorder has the one memory-ordering operation sync/atomic lacks:
// a release store, for indices shared with the kernel in rings.
//
// sync/atomic's Store is sequentially consistent. On amd64 that makes it
// an XCHG, a locked instruction: about 20 cycles on hardware, and on QEMU's
// TCG a call into a helper. A ring's producer or consumer index needs only
// release order (the slot's contents are visible before the index that
// publishes them), which x86 gives every plain store. StoreRelease32 is
// that plain store in assembly, where the call also keeps the compiler
// from moving earlier stores past it. On arm64 it is STLRW (what
// sync/atomic's Store is there too); elsewhere it is sync/atomic's Store.
//
// Loads need nothing new: sync/atomic's Load is already an acquire load
// (a plain MOV on amd64, LDARW on arm64).
package memorder
