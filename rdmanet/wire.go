package rdmanet

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The wire. Every message is a SEND with immediate data; the immediate
// value is the message's header, so a message's payload is the caller's
// bytes and nothing else:
//
//	bits 31–28  kind: kindData, kindCredit or kindFin
//	bits 27–16  zero (a peer that sets them speaks another version)
//	bits 15–0   credits: receives the sender reposted for its peer since
//	            it last said so
//
// A data message carries 1 to the peer's buffer size bytes; credit and
// fin messages carry none. Each message takes one of the peer's posted
// receives, which the peer counted out to the sender at the connection's
// start (hello.credits) and hands back as it reposts them.
const (
	kindData   = 1 // payload: stream bytes
	kindCredit = 2 // no payload: credits only
	kindFin    = 3 // no payload: the sender writes no more (io.EOF after the bytes before it)

	immKindShift   = 28
	immReservedMsk = 0x0fff0000
	immCreditMsk   = 0x0000ffff

	// maxCredits is the most receives a side may post for its peer: what
	// the header's credit field can hand back at once.
	maxCredits = immCreditMsk
)

// header is a message's header, its immediate data unpacked.
type header struct {
	kind    uint8
	credits uint16
}

// errProtocol is the cause of a connection's failure when its peer broke
// the wire's rules.
var errProtocol = errors.New("rdmanet: protocol violation by the peer")

// imm packs h for the wire.
func (h header) imm() uint32 { return uint32(h.kind)<<immKindShift | uint32(h.credits) }

// parseImm unpacks a message's immediate data.
func parseImm(imm uint32) (header, error) {
	h := header{kind: uint8(imm >> immKindShift), credits: uint16(imm & immCreditMsk)}
	if h.kind < kindData || h.kind > kindFin || imm&immReservedMsk != 0 {
		return header{}, fmt.Errorf("%w: message header %#08x", errProtocol, imm)
	}
	return h, nil
}

// The hello is the private data of the connection request and of its
// acceptance: what each side offers the other, 16 bytes, big-endian.
//
//	0–3    magic "RNET"
//	4      version (1)
//	5      flags (0)
//	6–7    credits: receives posted for the peer, 2 to maxCredits (one
//	       of them stays for credit and fin messages)
//	8–11   the size of each of those receives, in bytes (at least 1)
//	12–15  zero
//
// The CM may pad the private data with zeros; what follows the 16 bytes
// is ignored.
const (
	helloSize    = 16
	helloVersion = 1
)

var helloMagic = [4]byte{'R', 'N', 'E', 'T'}

type hello struct {
	credits uint16
	bufSize uint32
}

func (h hello) marshal() []byte {
	b := make([]byte, helloSize)
	copy(b, helloMagic[:])
	b[4] = helloVersion
	binary.BigEndian.PutUint16(b[6:], h.credits)
	binary.BigEndian.PutUint32(b[8:], h.bufSize)
	return b
}

func parseHello(b []byte) (hello, error) {
	if len(b) < helloSize {
		return hello{}, fmt.Errorf("%w: hello of %d bytes, want %d", errProtocol, len(b), helloSize)
	}
	if [4]byte(b[:4]) != helloMagic {
		return hello{}, fmt.Errorf("%w: hello magic %q, not an rdmanet peer", errProtocol, b[:4])
	}
	if b[4] != helloVersion || b[5] != 0 || binary.BigEndian.Uint32(b[12:]) != 0 {
		return hello{}, fmt.Errorf("%w: hello version %d, flags %#x: this side speaks version %d", errProtocol, b[4], b[5], helloVersion)
	}
	h := hello{credits: binary.BigEndian.Uint16(b[6:]), bufSize: binary.BigEndian.Uint32(b[8:])}
	if h.credits < 2 || h.bufSize == 0 {
		return hello{}, fmt.Errorf("%w: hello offers %d receives of %d bytes", errProtocol, h.credits, h.bufSize)
	}
	return h, nil
}
