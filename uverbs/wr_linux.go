package uverbs

// SGE returns the entry for n bytes at offset off of the MR's memory.
func (m *MR) SGE(off, n int) SGE {
	return SGE{Addr: m.Addr() + uint64(off), Length: uint32(n), LKey: m.lkey}
}
