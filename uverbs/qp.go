package uverbs

import "github.com/goverbs/goverbs/cq"

// QPConfig describes a new queue pair (struct ibv_qp_init_attr).
type QPConfig struct {
	Type           QPType
	SendCQ, RecvCQ *cq.CQ
	Cap            QPCap
	// SigAll makes every send request complete with a CQE, not only the
	// ones flagged signaled.
	SigAll bool
	// UserValue is a value of the caller's, kept with the QP (UserValue).
	UserValue uint64
	// SRQ, when set, is the shared receive queue the QP takes its
	// receives from (RC and UC QPs on this PD): Cap's receive fields are
	// then ignored, and QP.PostRecv is an error. The SRQ cannot be closed
	// while the QP exists (EBUSY).
	SRQ *SRQ
}

// QPType is a queue pair's transport service (enum ibv_qp_type).
type QPType uint8

// Queue pair types.
const (
	RC QPType = 2 // reliable connected
	UC QPType = 3 // unreliable connected
	UD QPType = 4 // unreliable datagram
)

func (t QPType) String() string { return enumString(t, "QPType", "", "", "RC", "UC", "UD") }

// QPState is a queue pair's state (enum ibv_qp_state).
type QPState uint8

// Queue pair states.
const (
	QPReset QPState = iota
	QPInit
	QPRTR // ready to receive
	QPRTS // ready to send
	QPSQD // send queue drained
	QPSQE // send queue error
	QPErr
)

func (s QPState) String() string {
	return enumString(s, "QPState", "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR")
}

// QPAttrMask says which fields of a QPAttr a Modify sets or a Query
// fills (enum ibv_qp_attr_mask, the kernel's enum ib_qp_attr_mask).
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState            QPAttrMask = 1 << 0
	QPAttrCurState         QPAttrMask = 1 << 1
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	QPAttrAccessFlags      QPAttrMask = 1 << 3
	QPAttrPKeyIndex        QPAttrMask = 1 << 4
	QPAttrPort             QPAttrMask = 1 << 5
	QPAttrQKey             QPAttrMask = 1 << 6
	QPAttrAV               QPAttrMask = 1 << 7
	QPAttrPathMTU          QPAttrMask = 1 << 8
	QPAttrTimeout          QPAttrMask = 1 << 9
	QPAttrRetryCnt         QPAttrMask = 1 << 10
	QPAttrRNRRetry         QPAttrMask = 1 << 11
	QPAttrRQPSN            QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	QPAttrAltPath          QPAttrMask = 1 << 14
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15
	QPAttrSQPSN            QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	QPAttrPathMigState     QPAttrMask = 1 << 18
	QPAttrCap              QPAttrMask = 1 << 19
	QPAttrDestQPN          QPAttrMask = 1 << 20
	qpAttrAll              QPAttrMask = 1<<21 - 1
)

// QPCap are a QP's queue sizes (struct ibv_qp_cap).
type QPCap struct {
	MaxSendWR, MaxRecvWR   uint32
	MaxSendSGE, MaxRecvSGE uint32
	MaxInlineData          uint32
}

// GlobalRoute is the GRH part of an address vector (struct ibv_global_route):
// RoCE always needs it.
type GlobalRoute struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr is an address vector (struct ibv_ah_attr): where a QP's packets go.
type AHAttr struct {
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    bool // GRH is valid: true for RoCE
	Port        uint8
}

// QPAttr holds a QP's attributes (struct ibv_qp_attr); a QPAttrMask says
// which are meant.
type QPAttr struct {
	State, CurState QPState
	PathMTU         MTU
	QKey            uint32
	RQPSN, SQPSN    uint32
	DestQPN         uint32
	AccessFlags     Access
	Cap             QPCap
	AH              AHAttr
	PKeyIndex       uint16
	SQDraining      bool
	MaxRdAtomic     uint8 // outstanding RDMA reads/atomics as initiator
	MaxDestRdAtomic uint8 // … as target
	MinRNRTimer     uint8
	Port            uint8
	Timeout         uint8 // local ACK timeout: 4.096 µs · 2^Timeout
	RetryCnt        uint8
	RNRRetry        uint8
}
