package uverbs

// Access is a set of memory access rights (enum ib_uverbs_access_flags).
type Access uint32

// Access rights of a memory region. Remote write and remote atomic need
// local write too.
const (
	AccessLocalWrite   Access = 1 << 0
	AccessRemoteWrite  Access = 1 << 1
	AccessRemoteRead   Access = 1 << 2
	AccessRemoteAtomic Access = 1 << 3
	AccessMWBind       Access = 1 << 4
	AccessZeroBased    Access = 1 << 5
	AccessOnDemand     Access = 1 << 6
	AccessHugeTLB      Access = 1 << 7
	// AccessFlushGlobal lets a peer's WRFlush with FlushGlobal cover the
	// region; on a QP (ConnectOptions.Access) it lets the QP take such
	// flushes at all. rxe from Linux 6.2; elsewhere RegMR fails with
	// ErrNotSupported.
	AccessFlushGlobal Access = 1 << 8
	// AccessFlushPersistent does the same for FlushPersistent. Only
	// persistent memory (pmem) can be registered with it: rxe refuses a
	// region of RAM (EINVAL).
	AccessFlushPersistent Access = 1 << 9
	AccessRelaxedOrder    Access = 1 << 20
)
