//go:build !linux

package uverbs

// PD is a protection domain (ibv_pd). Not on this system: every method
// returns an error wrapping ErrNotSupported, or a zero value.
type PD struct{}

// Context returns nil.
func (p *PD) Context() *Context { return nil }

// Close returns an error wrapping ErrNotSupported.
func (p *PD) Close() error { return unsupported("dealloc pd", "") }

// RegMR returns an error wrapping ErrNotSupported.
func (p *PD) RegMR(mem []byte, access Access) (*MR, error) { return nil, unsupported("reg mr", "") }

// RegMRAt returns an error wrapping ErrNotSupported.
func (p *PD) RegMRAt(mem []byte, iova uint64, access Access) (*MR, error) {
	return nil, unsupported("reg mr iova", "")
}

// AllocMW returns an error wrapping ErrNotSupported.
func (p *PD) AllocMW(t MWType) (*MW, error) { return nil, unsupported("alloc mw", "") }

// MW is a memory window (ibv_mw). Not on this system: every method
// returns an error wrapping ErrNotSupported, or a zero value.
type MW struct{}

// RKey returns 0.
func (w *MW) RKey() uint32 { return 0 }

// Type returns 0.
func (w *MW) Type() MWType { return 0 }

// PD returns nil.
func (w *MW) PD() *PD { return nil }

// Close returns an error wrapping ErrNotSupported.
func (w *MW) Close() error { return unsupported("dealloc mw", "") }

// MR is a registered memory region (ibv_mr). Not on this system: every
// method returns an error wrapping ErrNotSupported, or a zero value.
type MR struct{}

// LKey returns 0.
func (m *MR) LKey() uint32 { return 0 }

// RKey returns 0.
func (m *MR) RKey() uint32 { return 0 }

// SGE returns an error wrapping ErrNotSupported.
func (m *MR) SGE(off, n int) (SGE, error) { return SGE{}, unsupported("make sge", "") }

// Addr returns 0.
func (m *MR) Addr() uint64 { return 0 }

// Bytes returns nil.
func (m *MR) Bytes() []byte { return nil }

// PD returns nil.
func (m *MR) PD() *PD { return nil }

// Rereg returns an error wrapping ErrNotSupported.
func (m *MR) Rereg(change ReregFlags, pd *PD, access Access) error {
	return unsupported("rereg mr", "")
}

// Close returns an error wrapping ErrNotSupported.
func (m *MR) Close() error { return unsupported("dereg mr", "") }

// Buffer is page-aligned memory outside the Go heap, for RDMA. Not on
// this system: AllocBuffer fails.
type Buffer struct{}

// AllocBuffer returns an error wrapping ErrNotSupported.
func AllocBuffer(n int) (*Buffer, error) { return nil, unsupported("alloc buffer", "") }

// Bytes returns nil.
func (b *Buffer) Bytes() []byte { return nil }

// Close returns an error wrapping ErrNotSupported.
func (b *Buffer) Close() error { return unsupported("free buffer", "") }
