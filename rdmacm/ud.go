package rdmacm

import (
	"strconv"
	"syscall"

	"github.com/goverbs/goverbs/uverbs"
)

// SIDRError says that a UD peer's connection manager refused a DialUD
// (its SIDR reply's status, reported as UNREACHABLE): Status 1 is
// "nobody listens on the port", 2 the peer's application rejected
// (Request.Reject). errors.Is(err, syscall.ECONNREFUSED) is true of it.
type SIDRError struct {
	// Status is the SIDR REP's status (enum ib_cm_sidr_status).
	Status int
}

// The SIDR reply statuses a Go program meets most (IB_SIDR_*).
const (
	SIDRUnsupported = 1 // nobody listens on the port (the service ID)
	SIDRReject      = 2 // the peer's application rejected
)

func (e *SIDRError) Error() string {
	switch e.Status {
	case SIDRUnsupported:
		return "UD request refused: nobody listens on the port (SIDR status 1, unsupported)"
	case SIDRReject:
		return "UD request rejected by the peer (SIDR status 2, reject)"
	case 3:
		return "UD request refused: no QP (SIDR status 3)"
	}
	return "UD request refused (SIDR status " + strconv.Itoa(e.Status) + ")"
}

// Is makes errors.Is(err, syscall.ECONNREFUSED) true.
func (e *SIDRError) Is(target error) bool { return target == syscall.ECONNREFUSED }

// UDPeer is where a UDConn's datagrams go: the peer's QP number and
// Q_Key, and an address handle that reaches it. Send with
// uverbs.SendWR{AH: p.AH, RemoteQPN: p.QPN, RemoteQKey: p.QKey}.
type UDPeer struct {
	QPN  uint32
	QKey uint32
	AH   *uverbs.AH
}
