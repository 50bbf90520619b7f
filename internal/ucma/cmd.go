package ucma

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"
	"unsafe"

	"github.com/goverbs/goverbs/uapi"
)

var ne = binary.NativeEndian

// Sizes of a command's memory: the header and the largest body (struct
// rdma_ucm_accept), and room for the largest response (a path query with
// six path records; an event needs 336 bytes).
const (
	hdrSize = 8 // struct rdma_ucm_cmd_hdr
	reqSize = hdrSize + 296
	resSize = 512
)

// The compiler holds the sizes above to the structs: each line compiles
// only while the struct fits.
var (
	_ [reqSize - hdrSize - unsafe.Sizeof(uapi.RDMAUCMAccept{})]struct{}
	_ [reqSize - hdrSize - unsafe.Sizeof(uapi.RDMAUCMConnect{})]struct{}
	_ [reqSize - hdrSize - unsafe.Sizeof(uapi.RDMAUCMResolveAddr{})]struct{}
	_ [reqSize - hdrSize - unsafe.Sizeof(uapi.RDMAUCMReject{})]struct{}
	_ [resSize - unsafe.Sizeof(uapi.RDMAUCMEventResp{})]struct{}
	_ [resSize - unsafe.Sizeof(uapi.RDMAUCMQueryAddrResp{})]struct{}
	_ [resSize - unsafe.Sizeof(uapi.RDMAUCMQueryRouteResp{})]struct{}
	_ [resSize - unsafe.Sizeof(uapi.IBUverbsQPAttr{})]struct{}
	_ [resSize - unsafe.Sizeof(uapi.RDMAUCMQueryPathResp{}) - 6*unsafe.Sizeof(uapi.IBPathRecData{})]struct{}
)

// A cmd is one write command on the rdma_cm device: the header and body
// the kernel reads (req), and the memory it writes the response to
// (resp), whose address goes in the body's response field. It lives on
// the heap, so no Go stack address reaches the kernel, and is reused:
// Conn keeps one for GET_EVENT, the others come from a pool. The words
// keep every struct 8-byte aligned.
type cmd struct {
	req  [reqSize / 8]uint64
	resp [resSize / 8]uint64
	n    int // request bytes: header and body
	out  int // response bytes the kernel may write

	// write, made once with the cmd, writes it to the fd it is given
	// on the Conn via, leaving the result in errno: Conn.do hands it to
	// the fd's RawConn.Control, where a closure made per command would
	// be two allocations a command.
	write func(fd uintptr)
	via   *Conn
	errno syscall.Errno
}

// start begins command op, whose body is a T, with a response of out
// bytes: it zeroes the request and that much of the response, fills the
// header (in is sizeof(T), the kernel's struct) and returns the body.
func start[T any](c *cmd, op uint32, out int) *T {
	var zero T
	in := int(unsafe.Sizeof(zero))
	if hdrSize+in > reqSize || out > resSize {
		panic("ucma: command larger than its buffer") // a bug in goverbs, never caller input
	}
	clear(c.req[:])
	clear(c.resp[:(out+7)/8])
	h := (*uapi.RDMAUCMCmdHdr)(unsafe.Pointer(&c.req[0]))
	h.Cmd = op
	h.In = uint16(in)
	h.Out = uint16(out)
	c.n, c.out = hdrSize+in, out
	return (*T)(unsafe.Pointer(&c.req[1])) // the body follows the 8-byte header, 8-byte aligned
}

// request returns the bytes write(2) sends: header and body.
func (c *cmd) request() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&c.req[0])), reqSize)[:c.n]
}

// response returns the bytes the kernel may have written.
func (c *cmd) response() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&c.resp[0])), resSize)[:c.out]
}

// responsePointer is the address of resp, for the body's response field.
func (c *cmd) responsePointer() uapi.Pointer { return uapi.NewPointer(unsafe.Pointer(&c.resp[0])) }

// ConnParam is struct rdma_ucm_conn_param: what CONNECT and ACCEPT send
// to the peer's CM and what the connection events report of the peer's.
type ConnParam struct {
	// PrivateData goes in the CM message: at most 255 bytes here, and the
	// kernel allows less per port space and message (rdmacm-facts.md).
	// In a decoded event it points into the Event.
	PrivateData        []byte
	QPNum              uint32 // the local QP's number (24 bits)
	QKey               uint32 // AF_IB ids only
	SRQ                bool   // the QP uses an SRQ
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8 // ignored by ACCEPT
	RNRRetryCount      uint8
}

// maxPrivateData is the most private data rdma_ucm_conn_param and
// rdma_ucm_reject carry: their arrays hold RDMA_MAX_PRIVATE_DATA (256),
// their lengths are a __u8.
const maxPrivateData = 255

// ECE is struct rdma_ucm_ece: enhanced connection establishment, the
// vendor's options offered in CONNECT and ACCEPT (zero: none).
type ECE struct {
	VendorID uint32
	AttrMod  uint32
}

func errPrivateData(n int) error {
	return fmt.Errorf("private data of %d bytes, more than the %d a CM message carries: %w", n, maxPrivateData, syscall.EINVAL)
}

// putConnParam fills dst from p and marks it valid.
func putConnParam(dst *uapi.RDMAUCMConnParam, p *ConnParam) error {
	if len(p.PrivateData) > maxPrivateData {
		return errPrivateData(len(p.PrivateData))
	}
	dst.QPNum = p.QPNum
	dst.Qkey = p.QKey
	copy(dst.PrivateData[:], p.PrivateData)
	dst.PrivateDataLen = uint8(len(p.PrivateData))
	if p.SRQ {
		dst.SRQ = 1
	}
	dst.ResponderResources = p.ResponderResources
	dst.InitiatorDepth = p.InitiatorDepth
	dst.FlowControl = p.FlowControl
	dst.RetryCount = p.RetryCount
	dst.RnrRetryCount = p.RNRRetryCount
	dst.Valid = 1
	return nil
}

// The encoders below fill c with one command each, as librdmacm writes
// it: the whole struct of the kernel's header as in, the response's size
// as out. They check what the caller gave and never touch the kernel.

func (c *cmd) createID(uid uint64, ps uint16, qpType uint8) {
	b := start[uapi.RDMAUCMCreateID](c, uapi.RDMA_USER_CM_CMD_CREATE_ID, int(unsafe.Sizeof(uapi.RDMAUCMCreateIDResp{})))
	b.Uid = uid
	b.Response = c.responsePointer()
	b.Ps = ps
	b.QPType = qpType
}

func (c *cmd) destroyID(id uint32) {
	b := start[uapi.RDMAUCMDestroyID](c, uapi.RDMA_USER_CM_CMD_DESTROY_ID, int(unsafe.Sizeof(uapi.RDMAUCMDestroyIDResp{})))
	b.Response = c.responsePointer()
	b.ID = id
}

// sockaddrIn6Bytes views a struct sockaddr_in6 member as its bytes.
func sockaddrIn6Bytes(s *uapi.SockaddrIn6) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(s)), unsafe.Sizeof(*s))
}

// storageBytes views a struct __kernel_sockaddr_storage member as its bytes.
func storageBytes(s *uapi.KernelSockaddrStorage) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(s)), unsafe.Sizeof(*s))
}

// putIP writes an IP address into a sockaddr_in6 member (which holds a
// sockaddr_in as well); an invalid ap writes nothing, if none is allowed.
func putIP(dst *uapi.SockaddrIn6, ap netip.AddrPort, optional bool) error {
	if !ap.IsValid() {
		if optional {
			return nil
		}
		return fmt.Errorf("no address: %w", syscall.EINVAL)
	}
	_, err := putSockaddr(sockaddrIn6Bytes(dst), IPSockaddr(ap))
	return wrapEINVAL(err)
}

// putStorage writes s into a storage member and returns its size; the
// zero Sockaddr writes nothing, if none is allowed.
func putStorage(dst *uapi.KernelSockaddrStorage, s Sockaddr, optional bool) (uint16, error) {
	if s.Family == 0 && !optional {
		return 0, fmt.Errorf("no address: %w", syscall.EINVAL)
	}
	n, err := putSockaddr(storageBytes(dst), s)
	return uint16(n), wrapEINVAL(err)
}

// wrapEINVAL makes a refused address an EINVAL, as the kernel would call it.
func wrapEINVAL(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", err, syscall.EINVAL)
}

func (c *cmd) bindIP(id uint32, addr netip.AddrPort) error {
	b := start[uapi.RDMAUCMBindIp](c, uapi.RDMA_USER_CM_CMD_BIND_IP, 0)
	b.ID = id
	return putIP(&b.Addr, addr, false)
}

func (c *cmd) bind(id uint32, addr Sockaddr) error {
	b := start[uapi.RDMAUCMBind](c, uapi.RDMA_USER_CM_CMD_BIND, 0)
	b.ID = id
	var err error
	b.AddrSize, err = putStorage(&b.Addr, addr, false)
	return err
}

func (c *cmd) resolveIP(id uint32, src, dst netip.AddrPort, timeoutMs uint32) error {
	b := start[uapi.RDMAUCMResolveIp](c, uapi.RDMA_USER_CM_CMD_RESOLVE_IP, 0)
	b.ID = id
	b.TimeoutMs = timeoutMs
	if err := putIP(&b.SrcAddr, src, true); err != nil {
		return err
	}
	return putIP(&b.DstAddr, dst, false)
}

func (c *cmd) resolveAddr(id uint32, src, dst Sockaddr, timeoutMs uint32) error {
	b := start[uapi.RDMAUCMResolveAddr](c, uapi.RDMA_USER_CM_CMD_RESOLVE_ADDR, 0)
	b.ID = id
	b.TimeoutMs = timeoutMs
	var err error
	if b.SrcSize, err = putStorage(&b.SrcAddr, src, true); err != nil {
		return err
	}
	b.DstSize, err = putStorage(&b.DstAddr, dst, false)
	return err
}

func (c *cmd) resolveRoute(id uint32, timeoutMs uint32) {
	b := start[uapi.RDMAUCMResolveRoute](c, uapi.RDMA_USER_CM_CMD_RESOLVE_ROUTE, 0)
	b.ID = id
	b.TimeoutMs = timeoutMs
}

// noIBDevIndex is what the response's ibdev_index holds when the kernel
// did not write it (an older kernel's shorter struct), as librdmacm
// presets it.
const noIBDevIndex = 0xFFFFFFFF

// query is QUERY with option (RDMA_USER_CM_QUERY_*) and a response of out
// bytes; the address and GID answers get ibdev_index preset.
func (c *cmd) query(id, option uint32, out int) {
	b := start[uapi.RDMAUCMQuery](c, uapi.RDMA_USER_CM_CMD_QUERY, out)
	b.Response = c.responsePointer()
	b.ID = id
	b.Option = option
	if option != uapi.RDMA_USER_CM_QUERY_PATH {
		ne.PutUint32(c.response()[unsafe.Offsetof(uapi.RDMAUCMQueryAddrResp{}.IbdevIndex):], noIBDevIndex)
	}
}

func (c *cmd) queryRoute(id uint32) {
	b := start[uapi.RDMAUCMQuery](c, uapi.RDMA_USER_CM_CMD_QUERY_ROUTE, int(unsafe.Sizeof(uapi.RDMAUCMQueryRouteResp{})))
	b.Response = c.responsePointer()
	b.ID = id
	ne.PutUint32(c.response()[unsafe.Offsetof(uapi.RDMAUCMQueryRouteResp{}.IbdevIndex):], noIBDevIndex)
}

func (c *cmd) connect(id uint32, p *ConnParam, ece ECE) error {
	b := start[uapi.RDMAUCMConnect](c, uapi.RDMA_USER_CM_CMD_CONNECT, 0)
	b.ID = id
	b.Ece = uapi.RDMAUCMEce{VendorID: ece.VendorID, AttrMod: ece.AttrMod}
	if p == nil {
		p = &ConnParam{}
	}
	return putConnParam(&b.ConnParam, p)
}

func (c *cmd) listen(id, backlog uint32) {
	b := start[uapi.RDMAUCMListen](c, uapi.RDMA_USER_CM_CMD_LISTEN, 0)
	b.ID = id
	b.Backlog = backlog
}

// accept with p nil sends no connection parameters (valid 0): the active
// side's accept, which only establishes the connection.
func (c *cmd) accept(id uint32, uid uint64, p *ConnParam, ece ECE) error {
	b := start[uapi.RDMAUCMAccept](c, uapi.RDMA_USER_CM_CMD_ACCEPT, 0)
	b.Uid = uid
	b.ID = id
	b.Ece = uapi.RDMAUCMEce{VendorID: ece.VendorID, AttrMod: ece.AttrMod}
	if p == nil {
		return nil
	}
	return putConnParam(&b.ConnParam, p)
}

func (c *cmd) reject(id uint32, reason uint8, private []byte) error {
	b := start[uapi.RDMAUCMReject](c, uapi.RDMA_USER_CM_CMD_REJECT, 0)
	if len(private) > maxPrivateData {
		return errPrivateData(len(private))
	}
	b.ID = id
	b.Reason = reason
	b.PrivateDataLen = uint8(len(private))
	copy(b.PrivateData[:], private)
	return nil
}

func (c *cmd) disconnect(id uint32) {
	start[uapi.RDMAUCMDisconnect](c, uapi.RDMA_USER_CM_CMD_DISCONNECT, 0).ID = id
}

func (c *cmd) initQPAttr(id, state uint32) {
	b := start[uapi.RDMAUCMInitQPAttr](c, uapi.RDMA_USER_CM_CMD_INIT_QP_ATTR, int(unsafe.Sizeof(uapi.IBUverbsQPAttr{})))
	b.Response = c.responsePointer()
	b.ID = id
	b.QPState = state
}

// sizeofEventResp is the response GET_EVENT asks for: the whole struct,
// ece included.
const sizeofEventResp = int(unsafe.Sizeof(uapi.RDMAUCMEventResp{}))

func (c *cmd) getEvent() {
	start[uapi.RDMAUCMGetEvent](c, uapi.RDMA_USER_CM_CMD_GET_EVENT, sizeofEventResp).Response = c.responsePointer()
}

// setOption puts the option's value in the response memory, which this
// command does not otherwise use: the kernel copies optlen bytes in from
// optval.
func (c *cmd) setOption(id, level, name uint32, val []byte) error {
	b := start[uapi.RDMAUCMSetOption](c, uapi.RDMA_USER_CM_CMD_SET_OPTION, 0)
	if len(val) > resSize {
		return fmt.Errorf("option value of %d bytes, more than %d: %w", len(val), resSize, syscall.EINVAL)
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&c.resp[0])), resSize), val)
	b.Optval = c.responsePointer()
	b.ID = id
	b.Level = level
	b.Optname = name
	b.Optlen = uint32(len(val))
	return nil
}

func (c *cmd) notify(id, event uint32) {
	b := start[uapi.RDMAUCMNotify](c, uapi.RDMA_USER_CM_CMD_NOTIFY, 0)
	b.ID = id
	b.Event = event
}

// migrateID is written to the fd the id moves to; fd is the one it is on.
func (c *cmd) migrateID(id uint32, fd int) {
	b := start[uapi.RDMAUCMMigrateID](c, uapi.RDMA_USER_CM_CMD_MIGRATE_ID, int(unsafe.Sizeof(uapi.RDMAUCMMigrateResp{})))
	b.Response = c.responsePointer()
	b.ID = id
	b.FD = uint32(fd)
}

func (c *cmd) joinMcast(id uint32, uid uint64, addr Sockaddr, flags uint16) error {
	b := start[uapi.RDMAUCMJoinMcast](c, uapi.RDMA_USER_CM_CMD_JOIN_MCAST, int(unsafe.Sizeof(uapi.RDMAUCMCreateIDResp{})))
	b.Response = c.responsePointer()
	b.Uid = uid
	b.ID = id
	b.JoinFlags = flags
	var err error
	b.AddrSize, err = putStorage(&b.Addr, addr, false)
	return err
}

// leaveMcast is LEAVE_MCAST, whose body is struct rdma_ucm_destroy_id
// with the multicast join's id.
func (c *cmd) leaveMcast(mcID uint32) {
	b := start[uapi.RDMAUCMDestroyID](c, uapi.RDMA_USER_CM_CMD_LEAVE_MCAST, int(unsafe.Sizeof(uapi.RDMAUCMDestroyIDResp{})))
	b.Response = c.responsePointer()
	b.ID = mcID
}
