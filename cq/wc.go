package cq

import "strconv"

// WC is a work completion (struct ibv_wc): what the device reports about
// one finished work request.
//
// When Status is not Success, only WRID, Status, QPNum and VendorErr
// carry meaning (ibv_poll_cq(3)); goverbs sets every other field to zero
// so that a stale value can never be mistaken for one.
type WC struct {
	WRID      uint64 // the work request's ID, as posted
	Status    Status
	Opcode    Opcode
	VendorErr uint32 // the provider's error detail, for error completions
	ByteLen   uint32 // bytes received, or read by RDMA READ
	// Imm is the immediate data when Flags has WithImm, in host order (the
	// sender's value, whatever its byte order), or the rkey invalidated by
	// a send with invalidate when Flags has WithInv.
	Imm          uint32
	QPNum        uint32 // the local QP the completion belongs to
	SrcQP        uint32 // UD receives: the remote QP number
	Flags        Flags
	PKeyIndex    uint16 // GSI QPs only
	SLID         uint16 // UD receives on InfiniBand
	SL           uint8  // UD receives on InfiniBand
	DLIDPathBits uint8  // UD receives on InfiniBand
	// Timestamp is when the device completed the work request, by the
	// clock the CQ's Config.Timestamps named: device ticks (DeviceClock)
	// or nanoseconds since the Unix epoch (WallClock). 0 on a CQ created
	// without timestamps, and on error completions.
	Timestamp uint64
}

// Status is the outcome of a work request (enum ibv_wc_status).
type Status uint32

// Completion statuses.
const (
	Success Status = iota
	LocLenErr
	LocQPOpErr
	LocEECOpErr
	LocProtErr
	WRFlushErr
	MWBindErr
	BadRespErr
	LocAccessErr
	RemInvReqErr
	RemAccessErr
	RemOpErr
	RetryExcErr
	RNRRetryExcErr
	LocRDDViolErr
	RemInvRDReqErr
	RemAbortErr
	InvEECNErr
	InvEECStateErr
	FatalErr
	RespTimeoutErr
	GeneralErr
	TMErr
	TMRndvIncomplete
)

var statusText = [...]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error", "remote access error",
	"remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
	"local RDD violation error", "remote invalid RD request", "aborted error",
	"invalid EE context number", "invalid EE context state", "fatal error", "response timeout error",
	"general error", "TM error", "TM software rendezvous",
}

// String returns the text ibv_wc_status_str gives.
func (s Status) String() string {
	if int(s) < len(statusText) {
		return statusText[s]
	}
	return "unknown (" + strconv.Itoa(int(s)) + ")"
}

// Opcode says what a completed work request was (enum ibv_wc_opcode).
type Opcode uint32

// Completion opcodes. Receive completions have RecvBit set.
const (
	OpSend            Opcode = 0
	OpRDMAWrite       Opcode = 1
	OpRDMARead        Opcode = 2
	OpCompSwap        Opcode = 3
	OpFetchAdd        Opcode = 4
	OpBindMW          Opcode = 5
	OpLocalInv        Opcode = 6
	OpTSO             Opcode = 7
	OpFlush           Opcode = 8 // a WRFlush (rxe from Linux 6.2)
	OpAtomicWrite     Opcode = 9 // a WRAtomicWrite (rxe from Linux 6.2)
	OpRecv            Opcode = 128
	OpRecvRDMAWithImm Opcode = 129
	RecvBit           Opcode = 128
)

var opcodeText = map[Opcode]string{
	OpSend: "SEND", OpRDMAWrite: "RDMA_WRITE", OpRDMARead: "RDMA_READ", OpCompSwap: "COMP_SWAP",
	OpFetchAdd: "FETCH_ADD", OpBindMW: "BIND_MW", OpLocalInv: "LOCAL_INV", OpTSO: "TSO",
	OpFlush: "FLUSH", OpAtomicWrite: "ATOMIC_WRITE",
	OpRecv: "RECV", OpRecvRDMAWithImm: "RECV_RDMA_WITH_IMM",
}

func (o Opcode) String() string {
	if s, ok := opcodeText[o]; ok {
		return s
	}
	return "Opcode(" + strconv.Itoa(int(o)) + ")"
}

// Flags are a completion's flags (enum ibv_wc_flags). Providers translate
// their own bits to these: rxe reports the kernel's IB_WC_* values, where
// WITH_INVALIDATE is 4, not 8.
type Flags uint32

// Completion flags.
const (
	WithGRH     Flags = 1 << 0 // a GRH precedes the UD payload in the receive buffer
	WithImm     Flags = 1 << 1 // Imm holds immediate data
	IPCsumOK    Flags = 1 << 2
	WithInv     Flags = 1 << 3 // Imm holds the invalidated rkey
	TMSyncReq   Flags = 1 << 4
	TMMatch     Flags = 1 << 5
	TMDataValid Flags = 1 << 6
)
