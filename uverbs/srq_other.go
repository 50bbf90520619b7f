//go:build !linux

package uverbs

import "errors"

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

// Resize returns an error wrapping ErrNotSupported.
func (s *SRQ) Resize(maxWR uint32) error { return unsupported("modify srq", "") }

// ErrSRQFailed is the error of every post to an SRQ after the device
// reported it failed (the async event SRQ_ERR). It never occurs on this
// system.
var ErrSRQFailed = errors.New("srq failed (async event SRQ_ERR)")
