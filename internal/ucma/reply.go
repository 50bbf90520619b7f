package ucma

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/uapi"
)

// The parsers below read what the kernel wrote into a command's response
// memory. Each is a pure function of the bytes, which may be any bytes:
// too few is an error wrapping EIO, and nothing panics (the fuzz targets
// hold them to it).

// errShort is the error for a response shorter than its struct.
func errShort(what string, got, want int) error {
	return fmt.Errorf("%s: %d bytes, want %d: %w", what, got, want, syscall.EIO)
}

// read copies the first sizeof(T) bytes of b into a T, whatever b's
// alignment; ok is false when b is shorter.
func read[T any](b []byte) (v T, ok bool) {
	n := int(unsafe.Sizeof(v))
	if len(b) < n {
		return v, false
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), n), b)
	return v, true
}

// parseU32 reads a response that is one __u32: CREATE_ID's id,
// DESTROY_ID's, LEAVE_MCAST's and MIGRATE_ID's events_reported, JOIN_MCAST's id.
func parseU32(what string, b []byte) (uint32, error) {
	if len(b) < 4 {
		return 0, errShort(what, len(b), 4)
	}
	return ne.Uint32(b), nil
}

// Event is struct rdma_ucm_event_resp: one event GET_EVENT reported.
type Event struct {
	// UID is what the id's owner gave CREATE_ID (or ACCEPT, or
	// JOIN_MCAST for the multicast events); 0 on a CONNECT_REQUEST, whose
	// id is new.
	UID uint64
	// ID is the kernel's id the event is about: for CONNECT_REQUEST the
	// new id the kernel made for the request (the listener is found by
	// UID); for the multicast events the join's id.
	ID uint32
	// Type is the event: uapi.RDMA_CM_EVENT_*.
	Type uint32
	// Status is 0, a negative errno, or for REJECTED the CM's reject
	// reason (IB_CM_REJ_*, 28 for the consumer's own).
	Status int32
	// ECE is the peer's enhanced connection establishment options
	// (CONNECT_REQUEST, CONNECT_RESPONSE).
	ECE ECE
	// param is the union of the connection (RC) and datagram (UD)
	// parameters, as the kernel wrote it: which one holds depends on the
	// id's QP type, which the event does not say.
	param [unsafe.Sizeof(uapi.RDMAUCMEventResp{}.Param)]byte
}

// minEventResp is the least a kernel writes of an event: all but the
// reserved word and ece, which 32-bit librdmacm of old did not ask for.
const minEventResp = int(unsafe.Offsetof(uapi.RDMAUCMEventResp{}.Reserved))

// parseEvent reads an event response.
func parseEvent(b []byte) (Event, error) {
	if len(b) < minEventResp {
		return Event{}, errShort("event", len(b), minEventResp)
	}
	var r uapi.RDMAUCMEventResp // ece stays zero when b stops before it
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)), b)
	return Event{
		UID:    r.Uid,
		ID:     r.ID,
		Type:   r.Event,
		Status: int32(r.Status),
		ECE:    ECE{VendorID: r.Ece.VendorID, AttrMod: r.Ece.AttrMod},
		param:  r.Param,
	}, nil
}

// ConnParam returns the connection parameters of an event on an RC (or
// other connected) id: CONNECT_REQUEST, CONNECT_RESPONSE, ESTABLISHED,
// REJECTED (its private data). PrivateData points into e.
func (e *Event) ConnParam() ConnParam {
	p, _ := read[uapi.RDMAUCMConnParam](e.param[:])
	return ConnParam{
		PrivateData:        e.param[unsafe.Offsetof(p.PrivateData):][:p.PrivateDataLen],
		QPNum:              p.QPNum,
		QKey:               p.Qkey,
		SRQ:                p.SRQ != 0,
		ResponderResources: p.ResponderResources,
		InitiatorDepth:     p.InitiatorDepth,
		FlowControl:        p.FlowControl,
		RetryCount:         p.RetryCount,
		RNRRetryCount:      p.RnrRetryCount,
	}
}

// UDParam is struct rdma_ucm_ud_param: what the events of a UD id
// report of the peer (CONNECT_REQUEST, ESTABLISHED, MULTICAST_JOIN).
type UDParam struct {
	PrivateData []byte // points into the Event
	QPNum       uint32
	QKey        uint32
	// AH is the address handle's attributes as the kernel gives them to
	// user space (struct ib_uverbs_ah_attr): enough to create the AH that
	// reaches the peer.
	AH uapi.IBUverbsAHAttr
}

// UDParam returns the datagram parameters of an event on a UD id.
func (e *Event) UDParam() UDParam {
	p, _ := read[uapi.RDMAUCMUdParam](e.param[:])
	return UDParam{
		PrivateData: e.param[unsafe.Offsetof(p.PrivateData):][:p.PrivateDataLen],
		QPNum:       p.QPNum,
		QKey:        p.Qkey,
		AH:          p.AHAttr,
	}
}

// AddrInfo is struct rdma_ucm_query_addr_resp: QUERY's answer for
// RDMA_USER_CM_QUERY_ADDR (the id's addresses) and RDMA_USER_CM_QUERY_GID
// (its GIDs, as AF_IB addresses). NodeGUID, the port and the index say
// which RDMA device the id is bound to, once it is.
type AddrInfo struct {
	// NodeGUID is the device's node GUID in host order (the kernel
	// reports it big-endian), as RDMA netlink gives it; 0 before the id
	// has a device.
	NodeGUID uint64
	PortNum  uint8
	PKey     uint16 // host order
	Src, Dst Sockaddr
	// IBDevIndex is the device's index (RDMA netlink's
	// RDMA_NLDEV_ATTR_DEV_INDEX) when HaveIBDevIndex says the kernel
	// reported it: older kernels write a shorter struct without it.
	IBDevIndex     uint32
	HaveIBDevIndex bool
}

// sizeofAddrResp is the response QUERY_ADDR and QUERY_GID ask for.
const sizeofAddrResp = int(unsafe.Sizeof(uapi.RDMAUCMQueryAddrResp{}))

// parseAddrResp reads a QUERY_ADDR or QUERY_GID response.
func parseAddrResp(b []byte) (AddrInfo, error) {
	r, ok := read[uapi.RDMAUCMQueryAddrResp](b)
	if !ok {
		return AddrInfo{}, errShort("query addr", len(b), sizeofAddrResp)
	}
	a := AddrInfo{
		NodeGUID:       beU64(r.NodeGuid),
		PortNum:        r.PortNum,
		PKey:           beU16(r.Pkey),
		IBDevIndex:     r.IbdevIndex,
		HaveIBDevIndex: r.IbdevIndex != noIBDevIndex,
	}
	if !a.HaveIBDevIndex {
		a.IBDevIndex = 0
	}
	var err error
	if a.Src, err = parseStorage(&r.SrcAddr, r.SrcSize); err != nil {
		return AddrInfo{}, fmt.Errorf("query addr: source %w", err)
	}
	if a.Dst, err = parseStorage(&r.DstAddr, r.DstSize); err != nil {
		return AddrInfo{}, fmt.Errorf("query addr: destination %w", err)
	}
	return a, nil
}

// parseStorage reads the address of size bytes in a storage member.
func parseStorage(s *uapi.KernelSockaddrStorage, size uint16) (Sockaddr, error) {
	if int(size) > sizeofStorage {
		return Sockaddr{}, fmt.Errorf("address of %d bytes, more than a sockaddr_storage: %w", size, syscall.EIO)
	}
	a, err := parseSockaddr(storageBytes(s)[:size])
	if err != nil {
		return Sockaddr{}, fmt.Errorf("address: %w: %w", err, syscall.EIO)
	}
	return a, nil
}

// beU64 and beU16 turn a big-endian field, read in host order as the
// struct overlay reads it, into its value.
func beU64(v uint64) uint64 {
	var b [8]byte
	ne.PutUint64(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

func beU16(v uint16) uint16 {
	var b [2]byte
	ne.PutUint16(b[:], v)
	return binary.BigEndian.Uint16(b[:])
}

// Route is struct rdma_ucm_query_route_resp: QUERY_ROUTE's answer, the
// route of kernels and ids without QUERY (and of BIND_IP, RESOLVE_IP).
type Route struct {
	NodeGUID uint64 // host order; 0 before the id has a device
	// Paths are the path records as the kernel copied them to user space
	// (struct ib_user_path_rec, GIDs and LIDs big-endian); NumPaths of
	// them are resolved paths. With none, Paths[0] still holds the
	// source and destination GIDs and the P_Key.
	Paths          [2]uapi.IBUserPathRec
	NumPaths       uint32
	Src, Dst       Sockaddr
	PortNum        uint8
	IBDevIndex     uint32 // see AddrInfo
	HaveIBDevIndex bool
}

// sizeofRouteResp is the response QUERY_ROUTE asks for.
const sizeofRouteResp = int(unsafe.Sizeof(uapi.RDMAUCMQueryRouteResp{}))

// parseRoute reads a QUERY_ROUTE response.
func parseRoute(b []byte) (Route, error) {
	r, ok := read[uapi.RDMAUCMQueryRouteResp](b)
	if !ok {
		return Route{}, errShort("query route", len(b), sizeofRouteResp)
	}
	rt := Route{
		NodeGUID:       beU64(r.NodeGuid),
		Paths:          r.IBRoute,
		NumPaths:       r.NumPaths,
		PortNum:        r.PortNum,
		IBDevIndex:     r.IbdevIndex,
		HaveIBDevIndex: r.IbdevIndex != noIBDevIndex,
	}
	if !rt.HaveIBDevIndex {
		rt.IBDevIndex = 0
	}
	var err error
	if rt.Src, err = parseSockaddr(sockaddrIn6Bytes(&r.SrcAddr)); err != nil {
		return Route{}, fmt.Errorf("query route: source address: %w: %w", err, syscall.EIO)
	}
	if rt.Dst, err = parseSockaddr(sockaddrIn6Bytes(&r.DstAddr)); err != nil {
		return Route{}, fmt.Errorf("query route: destination address: %w: %w", err, syscall.EIO)
	}
	return rt, nil
}

// PathData is struct ib_path_rec_data: one path of QUERY's
// RDMA_USER_CM_QUERY_PATH answer (and of the RDMA_OPTION_IB_PATH option).
type PathData struct {
	Flags uint32 // IB_PATH_*: IB_PATH_GMP|IB_PATH_PRIMARY|IB_PATH_BIDIRECTIONAL from the kernel
	// Record is the SA PathRecord, packed as the InfiniBand spec lays it
	// out on the wire (big-endian).
	Record [64]byte
}

// maxPaths is how many path records the path query leaves room for, as
// librdmacm does.
const maxPaths = 6

// sizeofPathResp is the response the path query asks for: its header
// and maxPaths records, plus the byte the kernel's loop needs to write
// the last (it writes another record only while more than one record's
// room is left).
const sizeofPathResp = int(unsafe.Sizeof(uapi.RDMAUCMQueryPathResp{}) + maxPaths*unsafe.Sizeof(uapi.IBPathRecData{}) + 1)

// parsePaths reads a path query's response, b being all the room the
// command gave (the kernel says how many paths the id has, and writes as
// many as fit).
func parsePaths(b []byte) ([]PathData, error) {
	h, ok := read[uapi.RDMAUCMQueryPathResp](b)
	hdr := int(unsafe.Sizeof(h))
	if !ok {
		return nil, errShort("query path", len(b), hdr)
	}
	rec := int(unsafe.Sizeof(uapi.IBPathRecData{}))
	// The kernel's rule: another record while more than one record's
	// room is left.
	room := 0
	for left := len(b) - hdr; left > rec; left -= rec {
		room++
	}
	n := min(int(min(h.NumPaths, 1<<16)), room)
	paths := make([]PathData, n)
	for i := range paths {
		off := hdr + i*rec
		paths[i].Flags = ne.Uint32(b[off:])
		copy(paths[i].Record[:], b[off+8:off+rec])
	}
	return paths, nil
}

// parseQPAttr reads INIT_QP_ATTR's response: struct ib_uverbs_qp_attr,
// whose QPAttrMask says which attributes modify QP must take.
func parseQPAttr(b []byte) (uapi.IBUverbsQPAttr, error) {
	a, ok := read[uapi.IBUverbsQPAttr](b)
	if !ok {
		return a, errShort("init qp attr", len(b), int(unsafe.Sizeof(a)))
	}
	return a, nil
}
