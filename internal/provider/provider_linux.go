package provider

import (
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/transport"
)

// Driver opens contexts of one kind of device.
type Driver interface {
	// Name is the provider's name: "rxe", "mlx5".
	Name() string
	// Open runs GET_CONTEXT with the driver's data on a fresh uverbs fd
	// and returns the driver's side of the context.
	Open(conn *transport.Conn, fd int) (Context, kverbs.Context, error)
}

// Context is the provider's side of an open device.
type Context interface {
	// CreateCQ creates a CQ in the kernel with the driver's data and
	// sets up its ring.
	CreateCQ(r kverbs.CQReq) (CQ, error)
	// CreateQP creates a QP in the kernel with the driver's data and
	// sets up its work queues.
	CreateQP(r kverbs.QPReq) (QP, error)
	// CreateAH creates an address handle.
	CreateAH(pd uint32, userHandle uint64, attr *AHAttr) (AH, error)
	// Close releases what the provider holds for the context (mappings).
	Close() error
}

// CQ is the provider's side of a completion queue.
type CQ interface {
	Handle() uint32
	Size() int
	// Destroy destroys the CQ in the kernel, then releases its ring.
	Destroy() (kverbs.Events, error)
}

// QP is the provider's side of a queue pair.
type QP interface {
	Handle() uint32
	QPN() uint32
	Cap() kverbs.QPCap
	// Destroy destroys the QP in the kernel, then releases its queues,
	// returning the async events the kernel reported for it.
	Destroy() (uint32, error)
}

// AH is the provider's side of an address handle.
type AH interface {
	Handle() uint32
	Destroy() error
}
