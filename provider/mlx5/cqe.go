package mlx5

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/provider"
)

var be = binary.BigEndian

// cqe64 is one 64-byte CQE, read as the device wrote it, in place in the
// ring. An array, not a slice: its fields are read at constant offsets
// with no bounds check, and a *cqe64 is one word to pass.
type cqe64 [cqeSize64]byte

func (c *cqe64) opcode() uint8      { return c[cqeOpOwn] >> cqeOpcodeShift }
func (c *cqe64) format() uint8      { return c[cqeOpOwn] >> cqeFormatShift & cqeFormatMask }
func (c *cqe64) qpn() uint32        { return be.Uint32(c[cqeSopDropQPN:]) & 0xffffff }
func (c *cqe64) uidx() uint32       { return be.Uint32(c[cqeSRQNUIdx:]) & 0xffffff }
func (c *cqe64) wqeCounter() uint16 { return be.Uint16(c[cqeWQECounter:]) }

// sendSide reports whether the CQE completes a send-queue WQE (a
// requester completion or error) rather than a receive.
func (c *cqe64) sendSide() bool {
	op := c.opcode()
	return op == cqeReq || op == cqeReqErr
}

// statusOf maps an error CQE's syndrome to a completion status.
func statusOf(synd uint8) cq.Status {
	switch synd {
	case syndLocalLength:
		return cq.LocLenErr
	case syndLocalQPOp:
		return cq.LocQPOpErr
	case syndLocalProt:
		return cq.LocProtErr
	case syndWRFlush:
		return cq.WRFlushErr
	case syndMWBind:
		return cq.MWBindErr
	case syndBadResp:
		return cq.BadRespErr
	case syndLocalAccess:
		return cq.LocAccessErr
	case syndRemoteInvalidReq:
		return cq.RemInvReqErr
	case syndRemoteAccess:
		return cq.RemAccessErr
	case syndRemoteOp:
		return cq.RemOpErr
	case syndTransportRetryExc:
		return cq.RetryExcErr
	case syndRNRRetryExc:
		return cq.RNRRetryExcErr
	case syndRemoteAbortedError:
		return cq.RemAbortErr
	}
	return cq.GeneralErr
}

// decodeCQE fills everything of w but WRID from a software-owned CQE. It
// returns false for a CQE that is no completion of a work request goverbs
// posts: a resize marker, a no-packet or signature CQE, a compressed CQE or
// payload scattered into the CQE (both never requested). ud says the QP is
// UD, whose receives carry the source QP, SL and LID.
func decodeCQE(w *cq.WC, c *cqe64, ud bool) bool {
	if c.format() != 0 {
		return false
	}
	qpn := c.qpn()
	switch op := c.opcode(); op {
	case cqeReq:
		return decodeReq(w, c, qpn)
	case cqeRespSend, cqeRespSendImm, cqeRespWRImm, cqeRespSendInv:
		*w = cq.WC{
			QPNum:   qpn,
			Opcode:  cq.OpRecv,
			ByteLen: be.Uint32(c[cqeByteCnt:]),
		}
		switch op {
		case cqeRespSendImm:
			w.Flags, w.Imm = cq.WithImm, be.Uint32(c[cqeImmInvalPKey:])
		case cqeRespWRImm:
			w.Opcode = cq.OpRecvRDMAWithImm
			w.Flags, w.Imm = cq.WithImm, be.Uint32(c[cqeImmInvalPKey:])
		case cqeRespSendInv:
			w.Flags, w.Imm = cq.WithInv, be.Uint32(c[cqeImmInvalPKey:])
			provider.PeerInvalidated(w.Imm)
		}
		fr := be.Uint32(c[cqeFlagsRQPN:])
		if fr>>28&3 != 0 {
			w.Flags |= cq.WithGRH
		}
		if ud {
			w.SrcQP = fr & 0xffffff
			w.SL = uint8(fr >> 24 & 0xf)
			w.SLID = be.Uint16(c[cqeSLID:])
			w.DLIDPathBits = c[cqeMLPath] & 0x7f
		}
		return true
	case cqeReqErr, cqeRespErr:
		*w = cq.WC{
			QPNum:     qpn,
			Status:    statusOf(c[cqeSyndrome]),
			VendorErr: uint32(c[cqeVendorErrSynd]),
		}
		return true
	}
	return false
}

// decodeRecv is decodeCQE for a plain send received (opcode cqeRespSend,
// format 0) by QP qpn, not a UD QP's: small enough for the compiler to
// inline into Poll, as decodeReq.
func decodeRecv(w *cq.WC, c *cqe64, qpn uint32) {
	*w = cq.WC{QPNum: qpn, Opcode: cq.OpRecv, ByteLen: be.Uint32(c[cqeByteCnt:])}
	if c[cqeFlagsRQPN]>>4&3 != 0 { // flags_rqpn's top byte: the GRH bits
		w.Flags = cq.WithGRH
	}
}

// decodeReq is decodeCQE for a requester CQE (opcode cqeReq, format 0) of
// QP qpn: the WQE's opcode says what completed. Small enough for the
// compiler to inline into Poll, which takes these, the commonest
// CQEs, past decodeCQE's call.
func decodeReq(w *cq.WC, c *cqe64, qpn uint32) bool {
	*w = cq.WC{QPNum: qpn}
	switch c[cqeSopDropQPN] { // the WQE's opcode
	case opRDMAWrite, opRDMAWriteImm:
		w.Opcode = cq.OpRDMAWrite
	case opSend, opSendImm, opSendInval:
		w.Opcode = cq.OpSend
	case opRDMARead:
		w.Opcode = cq.OpRDMARead
		w.ByteLen = be.Uint32(c[cqeByteCnt:])
	case opAtomicCS:
		w.Opcode, w.ByteLen = cq.OpCompSwap, 8
	case opAtomicFA:
		w.Opcode, w.ByteLen = cq.OpFetchAdd, 8
	default:
		return false
	}
	return true
}
