package rdmanet

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The wire. Each side's read buffers are one ring of slots, which its
// hello advertises (address and rkey). A data message is an RDMA WRITE
// WITH IMMEDIATE of 1 byte to a few slots' worth into the next slots of
// the peer's ring; credit and fin messages are SENDs with immediate data
// and no bytes. The immediate value is the header, so the ring holds the
// caller's bytes and nothing else:
//
//	bits 31–28  kind: kindData, kindCredit or kindFin
//	bits 27–16  slots: of the peer's ring, that the data takes (1 or
//	            more; 0 in credit and fin messages)
//	bits 15–0   credits: slots the sender freed for its peer since it
//	            last said so
//
// A side spends its peer's credits (hello.credits at the start, one per
// slot of its ring) on messages: a data message its slots, a credit or
// fin message one. Every message also takes one of the receives the
// peer keeps posted, one per slot of the ring and reposted as soon as
// each completes: receives carry no memory, so they cost nothing, and
// credits bound the messages in flight below them.
const (
	kindData   = 1 // payload: stream bytes
	kindCredit = 2 // no payload: credits only
	kindFin    = 3 // no payload: the sender writes no more (io.EOF after the bytes before it)

	immKindShift  = 28
	immSlotsShift = 16
	immSlotsMsk   = 0x0fff0000
	immCreditMsk  = 0x0000ffff

	// maxCredits is the most slots a side's ring may have: what the
	// header's credit field can hand back at once.
	maxCredits = immCreditMsk
	// maxMsgSlots is the most slots one data message may take.
	maxMsgSlots = immSlotsMsk >> immSlotsShift
)

// header is a message's header, its immediate data unpacked.
type header struct {
	kind    uint8
	slots   uint16 // data messages only
	credits uint16
}

// errProtocol is the cause of a connection's failure when its peer broke
// the wire's rules.
var errProtocol = errors.New("rdmanet: protocol violation by the peer")

// imm packs h for the wire.
func (h header) imm() uint32 {
	return uint32(h.kind)<<immKindShift | uint32(h.slots)<<immSlotsShift | uint32(h.credits)
}

// parseImm unpacks a message's immediate data.
func parseImm(imm uint32) (header, error) {
	h := header{kind: uint8(imm >> immKindShift), slots: uint16(imm & immSlotsMsk >> immSlotsShift), credits: uint16(imm & immCreditMsk)}
	if h.kind < kindData || h.kind > kindFin || (h.kind == kindData) != (h.slots > 0) {
		return header{}, fmt.Errorf("%w: message header %#08x", errProtocol, imm)
	}
	return h, nil
}

// The hello is the private data of the connection request and of its
// acceptance: what each side offers the other, 24 bytes, big-endian.
//
//	0–3    magic "RNET"
//	4      version (2)
//	5      flags (0)
//	6–7    credits: the slots of the ring, 2 to maxCredits (one of them
//	       stays for credit and fin messages)
//	8–11   the size of each slot, in bytes (at least 1)
//	12–15  the ring's rkey
//	16–23  the ring's address, as the peer's RDMA WRITEs name it
//
// The CM may pad the private data with zeros; what follows the 24 bytes
// is ignored.
const (
	helloSize    = 24
	helloVersion = 2
)

var helloMagic = [4]byte{'R', 'N', 'E', 'T'}

type hello struct {
	credits  uint16
	bufSize  uint32
	rkey     uint32
	ringAddr uint64
}

func (h hello) marshal() []byte {
	b := make([]byte, helloSize)
	h.put(b)
	return b
}

// put writes h into b, helloSize bytes.
func (h hello) put(b []byte) {
	copy(b, helloMagic[:])
	b[4], b[5] = helloVersion, 0
	binary.BigEndian.PutUint16(b[6:], h.credits)
	binary.BigEndian.PutUint32(b[8:], h.bufSize)
	binary.BigEndian.PutUint32(b[12:], h.rkey)
	binary.BigEndian.PutUint64(b[16:], h.ringAddr)
}

func parseHello(b []byte) (hello, error) {
	if len(b) < helloSize {
		return hello{}, fmt.Errorf("%w: hello of %d bytes, want %d", errProtocol, len(b), helloSize)
	}
	if [4]byte(b[:4]) != helloMagic {
		return hello{}, fmt.Errorf("%w: hello magic %q, not an rdmanet peer", errProtocol, b[:4])
	}
	if b[4] != helloVersion || b[5] != 0 {
		return hello{}, fmt.Errorf("%w: hello version %d, flags %#x: this side speaks version %d", errProtocol, b[4], b[5], helloVersion)
	}
	h := hello{credits: binary.BigEndian.Uint16(b[6:]), bufSize: binary.BigEndian.Uint32(b[8:]),
		rkey: binary.BigEndian.Uint32(b[12:]), ringAddr: binary.BigEndian.Uint64(b[16:])}
	if h.credits < 2 || h.bufSize == 0 || uint64(h.bufSize)*uint64(h.credits) > 1<<40 {
		return hello{}, fmt.Errorf("%w: hello offers a ring of %d slots of %d bytes", errProtocol, h.credits, h.bufSize)
	}
	return h, nil
}
