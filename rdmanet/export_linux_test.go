package rdmanet

// RingToken is a token for c's read ring, where its peer writes: what a
// hostile peer that learnt it (from the connection's hello) could try.
func RingToken(c *Conn) Token {
	return Token{Addr: c.rbase, Len: uint64(len(c.rmr.Bytes())), RKey: c.rmr.RKey()}
}

// Ring returns c's read ring's memory.
func Ring(c *Conn) []byte { return c.rmr.Bytes() }
