package rdmacm

import (
	"fmt"
	"strconv"

	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// EventType is the kind of a connection-manager event (enum
// rdma_cm_event_type).
type EventType uint32

// The events the kernel reports, and the two the package reports in
// their place (see [EventChannel.Wait]). The values are the kernel's
// (enum rdma_cm_event_type); String names each as the kernel does,
// without its RDMA_CM_EVENT_ prefix.
const (
	// EventAddrResolved: ResolveAddr found the local device and address
	// for the destination.
	EventAddrResolved EventType = uapi.RDMA_CM_EVENT_ADDR_RESOLVED
	// EventAddrError: ResolveAddr failed; the event's Status says why.
	EventAddrError EventType = uapi.RDMA_CM_EVENT_ADDR_ERROR
	// EventRouteResolved: ResolveRoute found a path to the destination.
	EventRouteResolved EventType = uapi.RDMA_CM_EVENT_ROUTE_RESOLVED
	// EventRouteError: ResolveRoute failed; the event's Status says why.
	EventRouteError EventType = uapi.RDMA_CM_EVENT_ROUTE_ERROR
	// EventConnectRequest: a peer asks a listening ID to connect (or, in a
	// datagram port space, for its QP number); the event carries the new ID.
	EventConnectRequest EventType = uapi.RDMA_CM_EVENT_CONNECT_REQUEST
	// EventConnectResponse: the peer accepted a connect on an ID with no
	// QP. An ID with a QP reports EventEstablished (or EventConnectError)
	// in its place, having moved the QP to RTS.
	EventConnectResponse EventType = uapi.RDMA_CM_EVENT_CONNECT_RESPONSE
	// EventConnectError: connecting failed, or the QP could not be moved
	// to RTS after the peer accepted.
	EventConnectError EventType = uapi.RDMA_CM_EVENT_CONNECT_ERROR
	// EventUnreachable: the peer did not answer, or (datagram port spaces)
	// refused the request.
	EventUnreachable EventType = uapi.RDMA_CM_EVENT_UNREACHABLE
	// EventRejected: the peer rejected the connect; the event carries its
	// private data.
	EventRejected EventType = uapi.RDMA_CM_EVENT_REJECTED
	// EventEstablished: the connection is up.
	EventEstablished EventType = uapi.RDMA_CM_EVENT_ESTABLISHED
	// EventDisconnected: the connection is down (either side disconnected).
	EventDisconnected EventType = uapi.RDMA_CM_EVENT_DISCONNECTED
	// EventDeviceRemoval: the RDMA device the ID is bound to went away;
	// the ID must be closed.
	EventDeviceRemoval EventType = uapi.RDMA_CM_EVENT_DEVICE_REMOVAL
	// EventMulticastJoin: a multicast join completed.
	EventMulticastJoin EventType = uapi.RDMA_CM_EVENT_MULTICAST_JOIN
	// EventMulticastError: a multicast group failed after it was joined.
	EventMulticastError EventType = uapi.RDMA_CM_EVENT_MULTICAST_ERROR
	// EventAddrChange: the network address the ID is bound to changed.
	EventAddrChange EventType = uapi.RDMA_CM_EVENT_ADDR_CHANGE
	// EventTimewaitExit: the QP of a disconnected connection left the
	// time-wait state and may be reused.
	EventTimewaitExit EventType = uapi.RDMA_CM_EVENT_TIMEWAIT_EXIT
)

var eventNames = [...]string{
	EventAddrResolved:    "ADDR_RESOLVED",
	EventAddrError:       "ADDR_ERROR",
	EventRouteResolved:   "ROUTE_RESOLVED",
	EventRouteError:      "ROUTE_ERROR",
	EventConnectRequest:  "CONNECT_REQUEST",
	EventConnectResponse: "CONNECT_RESPONSE",
	EventConnectError:    "CONNECT_ERROR",
	EventUnreachable:     "UNREACHABLE",
	EventRejected:        "REJECTED",
	EventEstablished:     "ESTABLISHED",
	EventDisconnected:    "DISCONNECTED",
	EventDeviceRemoval:   "DEVICE_REMOVAL",
	EventMulticastJoin:   "MULTICAST_JOIN",
	EventMulticastError:  "MULTICAST_ERROR",
	EventAddrChange:      "ADDR_CHANGE",
	EventTimewaitExit:    "TIMEWAIT_EXIT",
}

// String returns the kernel's name of the event without its
// RDMA_CM_EVENT_ prefix ("ESTABLISHED"), or "EventType(N)".
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "EventType(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// PortSpace is an rdma_cm port space (enum rdma_port_space): the
// transport an ID's ports belong to.
type PortSpace uint16

// The port spaces: RC in TCP and IB, UD in UDP and IPOIB (DialUD and
// ListenUD use UDP).
const (
	PortSpaceTCP   PortSpace = uapi.RDMA_PS_TCP   // RC, IP addressing (rdma_cm's usual one)
	PortSpaceIB    PortSpace = uapi.RDMA_PS_IB    // RC here, native IB addressing
	PortSpaceUDP   PortSpace = uapi.RDMA_PS_UDP   // UD, IP addressing (SIDR)
	PortSpaceIPoIB PortSpace = uapi.RDMA_PS_IPOIB // UD, IPoIB's Q_Key (InfiniBand only)
)

// ud reports whether ps is a datagram (UD) port space.
func (ps PortSpace) ud() bool { return ps == PortSpaceUDP || ps == PortSpaceIPoIB }

// String names the port space as rdma_cma.h does ("TCP").
func (ps PortSpace) String() string {
	switch ps {
	case PortSpaceTCP:
		return "TCP"
	case PortSpaceIB:
		return "IB"
	case PortSpaceUDP:
		return "UDP"
	case PortSpaceIPoIB:
		return "IPOIB"
	}
	return fmt.Sprintf("PortSpace(%#x)", uint16(ps))
}

// The largest private data each connection-manager message carries
// (the CM's message field, less the rdma_cm's own header where it has
// one): CONNECT 56 bytes in the TCP port space (a REQ's 92 less 36),
// 92 in the IB one; ACCEPT 196 (a REP's); REJECT 148 (a REJ's).
const (
	MaxConnectPrivateDataTCP = 56
	MaxConnectPrivateDataIB  = 92
	MaxAcceptPrivateData     = 196
	MaxRejectPrivateData     = 148
	// In the UD port spaces: CONNECT 180 bytes (a SIDR REQ's 216 less
	// the rdma_cm's 36), ACCEPT and REJECT 136 (a SIDR REP's).
	MaxConnectPrivateDataUD = 180
	MaxAcceptPrivateDataUD  = 136
)

// maxPrivateData returns the limit for msg ("connect", "accept",
// "reject") in ps.
func maxPrivateData(ps PortSpace, msg string) int {
	if ps.ud() {
		if msg == "connect" {
			return MaxConnectPrivateDataUD
		}
		return MaxAcceptPrivateDataUD
	}
	switch msg {
	case "accept":
		return MaxAcceptPrivateData
	case "reject":
		return MaxRejectPrivateData
	}
	if ps == PortSpaceIB {
		return MaxConnectPrivateDataIB
	}
	return MaxConnectPrivateDataTCP
}

// checkPrivateData refuses private data longer than msg carries in ps.
func checkPrivateData(ps PortSpace, msg string, b []byte) error {
	if max := maxPrivateData(ps, msg); len(b) > max {
		return fmt.Errorf("%d bytes of private data, %s carries at most %d in port space %v: %w",
			len(b), msg, max, ps, errInvalid)
	}
	return nil
}

// MaxResources, as ConnParam.ResponderResources or InitiatorDepth, asks
// for the device's limit on RDMA reads and atomics in flight (librdmacm's
// RDMA_MAX_RESP_RES and RDMA_MAX_INIT_DEPTH).
const MaxResources = 255

// ConnParam is what a connection request, its acceptance and the events
// about them carry (struct rdma_conn_param).
type ConnParam struct {
	// PrivateData is the application's bytes in the CM message. Received,
	// it is the message's whole field: the peer's bytes, then zeros up to
	// the field's size (56, 196 or 148 bytes: see MaxAcceptPrivateData).
	PrivateData []byte
	// ResponderResources is how many RDMA reads and atomics the local QP
	// takes as target at once; InitiatorDepth how many it issues. In a
	// CONNECT_REQUEST they are the peer's offer seen from this side (the
	// kernel swaps them). 0 allows none: an RDMA READ or atomic on such a
	// connection fails. MaxResources asks for the device's limit, and is
	// what a nil ConnParam offers.
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8 // transport retries (3 bits); ACCEPT ignores it
	RNRRetryCount      uint8 // receiver-not-ready retries (3 bits; 7 is forever)
	SRQ                bool  // the QP takes its receives from an SRQ
	// QPNum is the QP's number: set by the package when the ID has a QP
	// (ID.AttachQP); in an event, the peer's QP.
	QPNum uint32
}

// Event is one connection-manager event, from [EventChannel.Wait] or
// [EventChannel.TryWait] (struct rdma_cm_event). Acknowledge each with
// [Event.Ack] once done with it: an ID whose events are not all
// acknowledged does not close. After Ack the Event is the channel's
// again: do not keep it, nor the PrivateData slice in it.
type Event struct {
	Type EventType
	// Status is 0, a negative errno (ADDR_ERROR, ROUTE_ERROR,
	// CONNECT_ERROR, UNREACHABLE), or for REJECTED the CM's reject reason
	// (8: nobody listens on the port; 28: the peer's application
	// rejected). Err says the same as an error.
	Status int
	// ID is the ID the event is about: for CONNECT_REQUEST a new one,
	// the kernel's for the request, which the listener's owner accepts,
	// rejects or closes.
	ID *ID
	// ListenID is the listening ID a CONNECT_REQUEST came to, else nil.
	ListenID *ID
	// Param is the peer's connection parameters and private data
	// (CONNECT_REQUEST, CONNECT_RESPONSE, ESTABLISHED, REJECTED). On a
	// UD ID only its PrivateData and QPNum are set, the same as UD's.
	Param ConnParam
	// UD is the peer's datagram parameters, on an ID in a UD port space
	// (CONNECT_REQUEST: the private data only; ESTABLISHED: the peer's
	// QP number, Q_Key and the address vector that reaches it).
	UD UDParam

	ev eventState // the channel's bookkeeping (per platform)
}

// Err returns the event's status as an error: nil for status 0, a
// *RejectError for REJECTED, a *SIDRError for a UD ID's UNREACHABLE
// with the peer's SIDR status, else the errno.
func (e *Event) Err() error { return statusErr(e.Type, e.Status, e.Param.PrivateData) }

// UDParam is what the events of a UD ID carry of the peer (struct
// rdma_ud_param): in the active side's ESTABLISHED, where to send
// datagrams (create the AH with uverbs.PD.NewAH(AH), then
// uverbs.SendWR{AH, RemoteQPN: QPNum, RemoteQKey: QKey}).
type UDParam struct {
	// PrivateData is the message's whole private-data field: the peer's
	// bytes, then zeros (180 bytes in a request, 136 in a reply).
	PrivateData []byte
	QPNum       uint32
	QKey        uint32
	AH          uverbs.AHAttr
}
