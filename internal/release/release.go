// Package release publishes a ring index with release ordering, as cheaply
// as each architecture allows: the store that hands a slot over to the
// other side of a ring shared with the kernel or a device (rxe's consumer
// and producer indices; mlx5's doorbell records and the queue tails its
// poll frees), after the loads and stores of the slot itself.
//
// sync/atomic has no release store: its Store is sequentially consistent,
// which on amd64 is an XCHG, a locked instruction, several times a plain
// MOV's cost. On amd64 and 386
// (x86-TSO: no store is seen before an earlier load or store) a release
// store is a plain MOV, as the kernel's smp_store_release and rdma-core's
// C11 atomic_store_explicit(..., memory_order_release) compile to. Store32
// is that MOV on those architectures, and sync/atomic's Store elsewhere
// (arm64's is STLR, a release store already).
//
// What stands in for the compiler barrier C puts beside the MOV: Go's
// compiler keeps every store in program order (each takes the memory state
// the previous one made) and schedules every load before the store that
// follows it in the same block (cmd/compile/internal/ssa's schedule adds
// that edge; tighten moves a load only to a block that starts with the
// load's memory state). So the plain store is issued after every access
// that precedes it in the source. The race detector does not know this
// order, so race-enabled builds use sync/atomic's Store.
//
// Only the side that owns an index may Store32 it, and only when no other
// goroutine stores it at the same time (the ring's lock serialises them);
// readers load it with sync/atomic.
package release
