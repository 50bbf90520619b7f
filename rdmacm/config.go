package rdmacm

import (
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

// Config describes the connections Dial, Listen and Request.Accept make.
// A nil *Config, and every zero field, means the default.
type Config struct {
	// Cap sizes the QP's queues. Zero fields take the defaults: 64 send
	// and 64 receive requests, one SGE each, no inline data.
	Cap uverbs.QPCap
	// CQSize is the entries of the connection's CQ, which its send and
	// receive queues share; 0 means Cap.MaxSendWR + Cap.MaxRecvWR.
	CQSize int
	// SigAll makes every send request complete with a CQE.
	SigAll bool

	// PrivateData goes to the peer in the connection request (Dial: at
	// most MaxConnectPrivateDataTCP bytes; DialUD: MaxConnectPrivateDataUD)
	// or its acceptance (Accept: at most MaxAcceptPrivateData; a UD
	// listener's: MaxAcceptPrivateDataUD). Its bytes are read when they
	// are sent, after Setup: Setup may fill in what it made (an rkey).
	PrivateData []byte
	// ResponderResources and InitiatorDepth bound the RDMA reads and
	// atomics in flight, as target and as initiator. 0 means the device's
	// maximum (on the passive side, capped by the peer's offer).
	ResponderResources uint8
	InitiatorDepth     uint8
	// RetryCount is the transport retry count; 0 means 7. RNRRetryCount
	// is the receiver-not-ready retry count; 0 means 7 (retry forever).
	RetryCount    uint8
	RNRRetryCount uint8
	// TOS is the type of service of the connection's packets (the IP
	// header's; RDMA_OPTION_ID_TOS); 0 leaves the kernel's default.
	TOS uint8
	// AckTimeout is how long the connection's QP waits for an
	// acknowledgment before it sends again (ID.SetAckTimeout: rounded up
	// to 4.096 µs × 2^n): a peer that stops answering fails the QP's
	// requests with cq.RetryExcErr after about (RetryCount+1) ×
	// AckTimeout. 0 leaves the CM's, from the path. RC connections only.
	AckTimeout time.Duration

	// PD, when set, is the protection domain the QP is made on; it must
	// be on the device the address resolves to. By default the QP goes
	// on a PD the package shares among every connection on the device
	// (one uverbs.Context and PD per device per process), which
	// Conn.PD returns.
	PD *uverbs.PD
	// CQ, when set, is the CQ the QP's send and receive queues use, in
	// place of one the connection makes with a completion channel of its
	// own: one CQ (and its channel) may serve many connections, as
	// rdma_create_qp's send_cq and recv_cq do, and a server that polls
	// one CQ for all of its connections saves a CQ and a file descriptor
	// per connection. It needs PD, made on the same uverbs.Context. It
	// stays the caller's: Close leaves it, and its channel, open; CQSize
	// is not used.
	CQ *cq.CQ
	// SRQ, when set, is the shared receive queue the connection's QP
	// takes its receives from (rdma_create_srq's role, ibv_qp_init_attr's
	// srq): a server posts one pool of receives for all of its
	// connections, and each receive's completion names the connection's
	// QP (cq.WC.QPNum). The QP goes on the SRQ's PD (PD may be that one,
	// or nil); Cap's receive fields are not used, and Conn.QP().PostRecv
	// is an error. RC only. It stays the caller's: close it after every
	// Conn that uses it (before, Close is EBUSY); a Listener's Close
	// leaves it, as it leaves the Conns it accepted.
	SRQ *uverbs.SRQ
	// OwnPD gives each connection a protection domain of its own, on the
	// device the address resolves to, in place of the shared one: the
	// rkeys of memory registered on its Conn.PD then work for that
	// connection's peer alone (an rkey is good only on QPs of its PD),
	// what a server of peers it does not trust wants. Close deallocates
	// the PD after Release has run; a UDConn's memory on it must be closed
	// before the UDConn. It cannot go with PD or CQ (EINVAL). The PD costs
	// two commands a connection (ALLOC_PD, DEALLOC_PD).
	OwnPD bool

	// Setup, when set, is called with the new Conn once its QP exists
	// (in INIT) and before the connection is made: before Dial's
	// connection request, before Accept's answer. Register memory and
	// post receives here, so that the peer's first SEND finds one (a
	// receive may be posted in INIT). An error aborts the connection
	// (Accept rejects it) and is returned.
	Setup func(*Conn) error
	// Release, when set, is Setup's counterpart: called with the Conn when
	// it is torn down (Close, or a Dial or Accept that fails after Setup
	// was called), after its QP is destroyed and before its own PD
	// (OwnPD) is deallocated: close here what Setup, or later the
	// application, registered on Conn.PD.
	Release func(*Conn)
	// SendOnly makes JoinMulticast join as a send-only full member
	// (RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER): the UDConn sends to the
	// group, and its QP is not attached to receive from it.
	SendOnly bool
	// SetupUD is Setup for DialUD, ListenUD's and JoinMulticast's
	// connections: called with the new UDConn once its QP is ready
	// (RTS), before the request (DialUD), the answer (Accept) or the
	// join. Post receives here.
	SetupUD func(*UDConn) error

	// Backlog is how many connection requests a Listener holds that
	// Accept has not taken yet (and the kernel's listen backlog); 0
	// means 128.
	Backlog int
	// CloseWait bounds how long Conn.Close waits for the peer to answer
	// its disconnect; 0 means one second. On rxe, a peer that never
	// disconnects leaves the kernel waiting about 100 s: Close does not.
	CloseWait time.Duration
}

const (
	defaultWR        = 64
	defaultRetry     = 7
	defaultBacklog   = 128
	defaultCloseWait = time.Second
	// resolveTimeout is the kernel's timeout for address and route
	// resolution when the context has no sooner deadline.
	resolveTimeout = 2 * time.Second
)

// withDefaults returns a copy of c (or of the zero Config) with the
// defaults filled in.
func (c *Config) withDefaults() Config {
	var d Config
	if c != nil {
		d = *c
	}
	if d.Cap.MaxSendWR == 0 {
		d.Cap.MaxSendWR = defaultWR
	}
	if d.Cap.MaxRecvWR == 0 {
		d.Cap.MaxRecvWR = defaultWR
	}
	if d.Cap.MaxSendSGE == 0 {
		d.Cap.MaxSendSGE = 1
	}
	if d.Cap.MaxRecvSGE == 0 {
		d.Cap.MaxRecvSGE = 1
	}
	if d.CQSize == 0 {
		d.CQSize = int(d.Cap.MaxSendWR + d.Cap.MaxRecvWR)
	}
	if d.RetryCount == 0 {
		d.RetryCount = defaultRetry
	}
	if d.RNRRetryCount == 0 {
		d.RNRRetryCount = defaultRetry
	}
	if d.Backlog <= 0 {
		d.Backlog = defaultBacklog
	}
	if d.CloseWait <= 0 {
		d.CloseWait = defaultCloseWait
	}
	return d
}

// ackTimeoutExponent returns the transport's ACK timeout exponent n for d:
// the least n (at most 31) with 4.096 µs × 2^n ≥ d.
func ackTimeoutExponent(d time.Duration) uint8 {
	n := uint8(0)
	for n < 31 && time.Duration(4096)<<n < d {
		n++
	}
	return n
}
