//go:build !linux

package uverbs

// SRQ is a shared receive queue (ibv_srq). Not on this system: every
// method returns an error wrapping ErrNotSupported, or a zero value.
type SRQ struct{}

// NewSRQ returns an error wrapping ErrNotSupported.
func (p *PD) NewSRQ(cfg SRQConfig) (*SRQ, error) { return nil, unsupported("create srq", "") }

// PostRecv returns an error wrapping ErrNotSupported.
func (s *SRQ) PostRecv(wrs []RecvWR) (int, error) { return 0, unsupported("post srq recv", "") }

// Arm returns an error wrapping ErrNotSupported.
func (s *SRQ) Arm(limit uint32) error { return unsupported("modify srq", "") }

// Query returns an error wrapping ErrNotSupported.
func (s *SRQ) Query() (SRQAttr, error) { return SRQAttr{}, unsupported("query srq", "") }

// Close returns an error wrapping ErrNotSupported.
func (s *SRQ) Close() error { return unsupported("destroy srq", "") }

// EventHandle returns 0.
func (s *SRQ) EventHandle() uint64 { return 0 }

// UserValue returns 0.
func (s *SRQ) UserValue() uint64 { return 0 }

// MaxWR returns 0.
func (s *SRQ) MaxWR() uint32 { return 0 }

// MaxSGE returns 0.
func (s *SRQ) MaxSGE() uint32 { return 0 }

// PD returns nil.
func (s *SRQ) PD() *PD { return nil }
