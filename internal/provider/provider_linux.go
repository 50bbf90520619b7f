package provider

import (
	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/cqseam"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/transport"
)

// Driver opens contexts of one kind of device.
type Driver interface {
	// Name is the provider's name: "rxe", "mlx5".
	Name() string
	// FWVersion formats the device's fw_ver (three 16-bit parts, major
	// in bits 32-47) as the driver's rdma-core provider does for
	// ibv_query_device, so that ibv_devinfo and goverbs print the same.
	FWVersion(fwVer uint64) string
	// Open runs GET_CONTEXT with the driver's data on a fresh uverbs fd
	// and returns the driver's side of the context.
	Open(conn *transport.Conn, fd int) (Context, kverbs.Context, error)
}

// Context is the provider's side of an open device.
type Context interface {
	// CreateCQ creates a CQ in the kernel with the driver's data and
	// sets up its ring.
	CreateCQ(r CQReq) (CQ, error)
	// CreateQP creates a QP in the kernel with the driver's data and
	// sets up its work queues.
	CreateQP(r kverbs.QPReq) (QP, error)
	// CreateAH creates an address handle.
	CreateAH(pd uint32, userHandle uint64, attr *AHAttr) (AH, error)
	// CreateSRQ creates a shared receive queue in the kernel with the
	// driver's data and sets up its ring.
	CreateSRQ(r kverbs.SRQReq) (SRQ, error)
	// Close releases what the provider holds for the context (mappings),
	// with the context's fd still open.
	Close() error
	// Release frees the memory the device may read until the kernel has
	// destroyed the context's objects (mlx5's doorbell records): it is
	// called after the fd is closed.
	Release()
}

// CQReq is what a CQ is made from: the kernel's request, whose Flags the
// provider sets, and the clock its completion timestamps come from
// (cq.Config.Timestamps), which the provider turns into the kernel's and
// its driver's flags, or refuses with an error wrapping ErrNotSupported.
type CQReq struct {
	kverbs.CQReq
	Timestamps cqseam.Clock
}

// CQ is the provider's side of a completion queue. ReqNotify and
// EventRead run under the cq package's lock, never concurrently with each
// other's kind or with Destroy and Release; PollRing takes that lock
// itself, when the ring is not empty.
type CQ interface {
	Handle() uint32
	Size() int
	// PollRing is cq.CQ.Poll: it moves up to len(wcs) completions from
	// the ring into wcs and returns how many, never consuming one it has
	// no slot for. It follows cqseam.RingLock's protocol: an empty ring
	// is seen without the lock; anything more is taken under it.
	PollRing(wcs []cq.WC, l *cqseam.RingLock) (int, error)
	// ReqNotify arms the CQ for its next (or next solicited) completion.
	ReqNotify(solicitedOnly bool) error
	// EventRead is called for each completion event read for the CQ
	// (mlx5 advances its arm sequence number there).
	EventRead()
	// ArmNeedsEventsRead reports whether the device ignores an arm made
	// after it raised an event for the CQ and before EventRead counted
	// that event (mlx5). The cq package then reads the channel's queued
	// events before such an arm.
	ArmNeedsEventsRead() bool
	// Resize makes the CQ hold at least n entries, keeping the
	// completions it holds, in order, and returns the new size.
	Resize(n int) (int, error)
	// Destroy destroys the CQ in the kernel, then releases its ring.
	Destroy() (kverbs.Events, error)
	// Release releases the ring without the kernel (its context is gone).
	Release()
}

// QP is the provider's side of a queue pair.
type QP interface {
	Handle() uint32
	QPN() uint32
	Cap() kverbs.QPCap
	// PostSend posts the requests in order and rings the doorbell once;
	// it returns how many it posted, and an error for the first it could
	// not. Not concurrent with itself.
	PostSend(wrs []SendWR) (int, error)
	// PostRecv posts receive requests, likewise. Not concurrent with itself.
	PostRecv(wrs []RecvWR) (int, error)
	// Destroy destroys the QP in the kernel, then releases its queues,
	// returning the async events the kernel reported for it.
	Destroy() (uint32, error)
	// Release releases the queues without the kernel (its context is gone).
	Release()
}

// SRQ is the provider's side of a shared receive queue.
type SRQ interface {
	Handle() uint32
	// SRQN is the SRQ's number, which completions of an XRC SRQ carry.
	SRQN() uint32
	// MaxWR and MaxSGE are what the kernel made.
	MaxWR() uint32
	MaxSGE() uint32
	// PostRecv posts receive requests, in order, as QP.PostRecv does.
	// Not concurrent with itself.
	PostRecv(wrs []RecvWR) (int, error)
	// Modify changes what mask selects (kverbs.SRQMaxWR, SRQLimit).
	Modify(mask uint32, a kverbs.SRQAttr) error
	// Destroy destroys the SRQ in the kernel, then releases its ring,
	// returning the async events the kernel reported for it.
	Destroy() (uint32, error)
	// Release releases the ring without the kernel (its context is gone).
	Release()
}

// AH is the provider's side of an address handle.
type AH interface {
	Handle() uint32
	Destroy() error
}

// Resetter is implemented by a QP whose user-space queue state must follow
// the QP to RESET (mlx5: the device starts its queues over at block 0). After
// the kernel moved the QP to RESET, with the QP's posts held off, uverbs
// calls CleanCQ for each of the QP's CQs (exclusive of that CQ's Poll) and
// then Reset.
type Resetter interface {
	// CleanCQ removes the QP's completions from the CQ's ring.
	CleanCQ(c CQ)
	// Reset empties the QP's queues and doorbell record.
	Reset()
}
