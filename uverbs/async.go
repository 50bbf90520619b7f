package uverbs

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/uapi"
)

// AsyncEventType is the kind of an asynchronous event (enum
// ibv_event_type).
type AsyncEventType uint32

// Async event types, numbered as enum ibv_event_type (and the kernel's
// enum ib_event_type) numbers them.
const (
	EventCQErr             AsyncEventType = 0  // a CQ overran: completions were lost
	EventQPFatal           AsyncEventType = 1  // a QP hit an error it cannot report in a completion
	EventQPReqErr          AsyncEventType = 2  // a QP's peer sent an invalid request
	EventQPAccessErr       AsyncEventType = 3  // a QP's peer violated an access right
	EventCommEst           AsyncEventType = 4  // a QP in RTR received its first message
	EventSQDrained         AsyncEventType = 5  // a QP in SQD has no send request in flight
	EventPathMig           AsyncEventType = 6  // a QP migrated to its alternate path
	EventPathMigErr        AsyncEventType = 7  // a QP could not migrate to its alternate path
	EventDeviceFatal       AsyncEventType = 8  // the device failed: close everything on it
	EventPortActive        AsyncEventType = 9  // a port became active
	EventPortErr           AsyncEventType = 10 // a port left the active state
	EventLIDChange         AsyncEventType = 11 // a port's LID changed
	EventPKeyChange        AsyncEventType = 12 // a port's P_Key table changed
	EventSMChange          AsyncEventType = 13 // a port's subnet manager changed
	EventSRQErr            AsyncEventType = 14 // an SRQ failed
	EventSRQLimitReached   AsyncEventType = 15 // an armed SRQ fell below its limit
	EventQPLastWQEReached  AsyncEventType = 16 // a QP on an SRQ in the error state will complete no more receives
	EventClientReregister  AsyncEventType = 17 // the SM asks to re-register with it
	EventGIDChange         AsyncEventType = 18 // a port's GID table changed
	EventWQFatal           AsyncEventType = 19 // a WQ failed
	EventDeviceSpeedChange AsyncEventType = 20 // the device's link speed changed (new in 2025: rdma-core 62)
	numAsyncEventTypes                    = 21
)

var asyncEventNames = [numAsyncEventTypes]string{ // as libibverbs' ibv_event_type_str
	EventCQErr:             "CQ error",
	EventQPFatal:           "local work queue catastrophic error",
	EventQPReqErr:          "invalid request local work queue error",
	EventQPAccessErr:       "local access violation work queue error",
	EventCommEst:           "communication established",
	EventSQDrained:         "send queue drained",
	EventPathMig:           "path migrated",
	EventPathMigErr:        "path migration request error",
	EventDeviceFatal:       "local catastrophic error",
	EventPortActive:        "port active",
	EventPortErr:           "port error",
	EventLIDChange:         "LID change",
	EventPKeyChange:        "P_Key change",
	EventSMChange:          "SM change",
	EventSRQErr:            "SRQ catastrophic error",
	EventSRQLimitReached:   "SRQ limit reached",
	EventQPLastWQEReached:  "last WQE reached",
	EventClientReregister:  "client reregistration",
	EventGIDChange:         "GID table change",
	EventWQFatal:           "WQ fatal",
	EventDeviceSpeedChange: "Device link speed change",
}

// String describes the event type as libibverbs' ibv_event_type_str does
// ("port active"); a type it does not know prints as "unknown (n)".
func (t AsyncEventType) String() string {
	if t < numAsyncEventTypes {
		return asyncEventNames[t]
	}
	return "unknown (" + strconv.FormatUint(uint64(t), 10) + ")"
}

// ElementKind is what an async event is about: the kind of object its
// Element names.
type ElementKind uint8

// Element kinds.
const (
	ElementDevice ElementKind = iota // the whole device (and event types goverbs does not know)
	ElementPort                      // a port: Element is its number
	ElementCQ                        // a CQ: Element is its user handle
	ElementQP                        // a QP: Element is its user handle
	ElementSRQ                       // an SRQ: Element is its user handle
	ElementWQ                        // a WQ: Element is its user handle
)

// String names the kind: "device", "port", "CQ", "QP", "SRQ", "WQ".
func (k ElementKind) String() string {
	return enumString(k, "ElementKind", "device", "port", "CQ", "QP", "SRQ", "WQ")
}

// Element returns the kind of object events of this type are about, as
// libibverbs' ibv_get_async_event sorts them.
func (t AsyncEventType) Element() ElementKind {
	switch t {
	case EventCQErr:
		return ElementCQ
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained,
		EventPathMig, EventPathMigErr, EventQPLastWQEReached:
		return ElementQP
	case EventSRQErr, EventSRQLimitReached:
		return ElementSRQ
	case EventWQFatal:
		return ElementWQ
	case EventPortActive, EventPortErr, EventLIDChange, EventPKeyChange, EventSMChange,
		EventClientReregister, EventGIDChange:
		return ElementPort
	}
	return ElementDevice
}

// AsyncEvent is an asynchronous event of a device (struct
// ibv_async_event): something happened to a port, to the device, or to a
// CQ, QP, SRQ or WQ outside the flow of completions.
//
// Acknowledge each event once with Ack, as libibverbs' ibv_ack_async_event
// requires; see Ack for what it counts.
type AsyncEvent struct {
	Type AsyncEventType
	// Element is the user handle of the CQ, QP, SRQ or WQ the event is
	// about, or the port number for a port event (the kernel's
	// ib_uverbs_async_event_desc.element). Kind says which.
	Element uint64

	// acks is the ack counter of the object the event names, found when
	// the event was read; nil for ports, the device, and objects no
	// longer (or never) known.
	acks *atomic.Uint32
}

// Kind returns what the event is about: Type.Element().
func (e AsyncEvent) Kind() ElementKind { return e.Type.Element() }

// Port returns the port a port event is about.
func (e AsyncEvent) Port() (port int, ok bool) {
	if e.Kind() != ElementPort || e.Element > 255 {
		return 0, false
	}
	return int(e.Element), true
}

// CQHandle returns the user handle of the CQ a CQ event is about.
func (e AsyncEvent) CQHandle() (uint64, bool) { return e.handle(ElementCQ) }

// QPHandle returns the user handle of the QP a QP event is about.
func (e AsyncEvent) QPHandle() (uint64, bool) { return e.handle(ElementQP) }

// SRQHandle returns the user handle of the SRQ an SRQ event is about.
func (e AsyncEvent) SRQHandle() (uint64, bool) { return e.handle(ElementSRQ) }

// WQHandle returns the user handle of the WQ a WQ event is about.
func (e AsyncEvent) WQHandle() (uint64, bool) { return e.handle(ElementWQ) }

func (e AsyncEvent) handle(k ElementKind) (uint64, bool) {
	if e.Kind() != k {
		return 0, false
	}
	return e.Element, true
}

// String describes the event: "port active (port 1)", "CQ error (CQ 7)".
func (e AsyncEvent) String() string {
	switch k := e.Kind(); k {
	case ElementDevice:
		return e.Type.String()
	default:
		return fmt.Sprintf("%s (%s %d)", e.Type, k, e.Element)
	}
}

// Ack acknowledges the event (ibv_ack_async_event). It is one atomic
// add: no lock, no allocation, never a wait, so acknowledging is never the
// bottleneck. Events about ports or the device need no ack, and Ack does
// nothing for them. Ack each event once: copies of an AsyncEvent are the
// same event.
//
// What it counts: the kernel counts the events it delivered about each
// CQ, QP, SRQ and WQ, and reports the count when the object is destroyed
// (async_events_reported); libibverbs' destroy blocks until the
// application has acknowledged as many. goverbs keeps the count per
// object but never blocks a Close on it: events carry the object's user
// handle, an integer goverbs never reuses, not a pointer, so an event
// handled or acknowledged after its object is gone cannot touch freed
// memory, and Ack is optional for correctness.
func (e AsyncEvent) Ack() {
	if e.acks != nil {
		e.acks.Add(1)
	}
}

// The layout of struct ib_uverbs_async_event_desc.
const (
	asyncEventSize      = int(unsafe.Sizeof(uapi.IBUverbsAsyncEventDesc{})) // 16
	asyncEventElement   = int(unsafe.Offsetof(uapi.IBUverbsAsyncEventDesc{}.Element))
	asyncEventEventType = int(unsafe.Offsetof(uapi.IBUverbsAsyncEventDesc{}.EventType))
)

// errAsyncEventSize is the error for a read that is not one whole event,
// built once.
var errAsyncEventSize = fmt.Errorf("async event read of a size other than %d bytes: %w", asyncEventSize, syscall.EIO)

// parseAsyncEvent decodes one struct ib_uverbs_async_event_desc
// {u64 element; u32 event_type; u32 reserved}, host-endian, as read(2)
// returns it from the async event fd.
func parseAsyncEvent(b []byte) (AsyncEvent, error) {
	if len(b) != asyncEventSize {
		return AsyncEvent{}, errAsyncEventSize
	}
	return AsyncEvent{
		Element: binary.NativeEndian.Uint64(b[asyncEventElement:]),
		Type:    AsyncEventType(binary.NativeEndian.Uint32(b[asyncEventEventType:])),
	}, nil
}
