//go:build !linux

package uverbs

// QP is a queue pair (ibv_qp). Not on this system: every method returns
// an error wrapping ErrNotSupported, or a zero value.
type QP struct{}

// NewQP returns an error wrapping ErrNotSupported.
func (p *PD) NewQP(cfg QPConfig) (*QP, error) { return nil, unsupported("create qp", "") }

// PostSend returns an error wrapping ErrNotSupported.
func (q *QP) PostSend(wrs []SendWR) (int, error) { return 0, unsupported("post send", "") }

// PostRecv returns an error wrapping ErrNotSupported.
func (q *QP) PostRecv(wrs []RecvWR) (int, error) { return 0, unsupported("post recv", "") }

// EventHandle returns 0.
func (q *QP) EventHandle() uint64 { return 0 }

// UserValue returns 0.
func (q *QP) UserValue() uint64 { return 0 }

// QPN returns 0.
func (q *QP) QPN() uint32 { return 0 }

// Type returns 0.
func (q *QP) Type() QPType { return 0 }

// Cap returns the zero QPCap.
func (q *QP) Cap() QPCap { return QPCap{} }

// PD returns nil.
func (q *QP) PD() *PD { return nil }

// Modify returns an error wrapping ErrNotSupported.
func (q *QP) Modify(attr *QPAttr, mask QPAttrMask) error { return unsupported("modify qp", "") }

// Query returns an error wrapping ErrNotSupported.
func (q *QP) Query(mask QPAttrMask) (QPAttr, error) { return QPAttr{}, unsupported("query qp", "") }

// Close returns an error wrapping ErrNotSupported.
func (q *QP) Close() error { return unsupported("destroy qp", "") }

// AH is an address handle (ibv_ah). Not on this system: NewAH fails.
type AH struct{}

// NewAH returns an error wrapping ErrNotSupported.
func (p *PD) NewAH(attr AHAttr) (*AH, error) { return nil, unsupported("create ah", "") }

// Close returns an error wrapping ErrNotSupported.
func (a *AH) Close() error { return unsupported("destroy ah", "") }

// AttachMcast returns an error wrapping ErrNotSupported.
func (q *QP) AttachMcast(gid GID, lid uint16) error { return unsupported("attach mcast", "") }

// DetachMcast returns an error wrapping ErrNotSupported.
func (q *QP) DetachMcast(gid GID, lid uint16) error { return unsupported("detach mcast", "") }
