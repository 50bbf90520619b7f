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
	AccessRelaxedOrder Access = 1 << 20
)
