package kverbs

import (
	"encoding/binary"
	"errors"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// unsupported reports whether err says the kernel lacks an ioctl method,
// so the legacy write command should be tried instead.
func unsupported(err error) bool {
	return errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP)
}

var ne = binary.NativeEndian

// Context is what GET_CONTEXT returns.
type Context struct {
	NumCompVectors uint32
	// AsyncFD is the async event fd the legacy write GET_CONTEXT returns,
	// or -1: the ioctl returns none (call AsyncEventAlloc).
	AsyncFD int
}

// GetContext creates the ucontext of the fd: by ioctl, or by the legacy
// write command on kernels without the method (< 5.6). uhwIn is the
// driver's request; the driver's response is copied into uhwOut.
func GetContext(c *transport.Conn, uhwIn, uhwOut []byte) (Context, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	cmd.Reset(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_GET_CONTEXT)
	vec := cmd.Out(uapi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, 4, false)
	uo := ioctlUHW(cmd, uhwIn, len(uhwOut))
	err := c.Invoke(cmd)
	if err == nil {
		ctx := Context{NumCompVectors: 1, AsyncFD: -1}
		if b := cmd.Output(vec); b != nil {
			ctx.NumCompVectors = ne.Uint32(b)
		}
		copy(uhwOut, cmd.Output(uo))
		return ctx, nil
	}
	if !unsupported(err) {
		return Context{}, err
	}
	req := cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_GET_CONTEXT, false,
		transport.SizeOf[uapi.IBUverbsGetContext](), transport.SizeOf[uapi.IBUverbsGetContextResp]())
	_ = req
	out := writeUHW(cmd, uhwIn, len(uhwOut))
	if err := c.Invoke(cmd); err != nil {
		return Context{}, err
	}
	resp := transport.As[uapi.IBUverbsGetContextResp](cmd.CoreOut())
	copy(uhwOut, out)
	return Context{NumCompVectors: resp.NumCompVectors, AsyncFD: int(int32(resp.AsyncFD))}, nil
}

// AsyncEventAlloc creates the context's async event fd (kernel ≥ 5.6).
func AsyncEventAlloc(c *transport.Conn) (int, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	cmd.Reset(uapi.UVERBS_OBJECT_ASYNC_EVENT, uapi.UVERBS_METHOD_ASYNC_EVENT_ALLOC)
	s := cmd.FDNew(uapi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
	if err := c.Invoke(cmd); err != nil {
		if unsupported(err) {
			return -1, errs.NewUnsupported("ASYNC_EVENT_ALLOC ioctl", "5.6", err)
		}
		return -1, err
	}
	return cmd.NewFD(s), nil
}

// AllocPD allocates a protection domain and returns its handle.
func AllocPD(c *transport.Conn) (uint32, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_ALLOC_PD, false,
		transport.SizeOf[uapi.IBUverbsAllocPD](), transport.SizeOf[uapi.IBUverbsAllocPDResp]())
	if err := c.Invoke(cmd); err != nil {
		return 0, err
	}
	return transport.As[uapi.IBUverbsAllocPDResp](cmd.CoreOut()).PDHandle, nil
}

// destroy runs an object's DESTROY ioctl (handle attr 0), falling back
// to the legacy write command whose request is just the u32 handle.
func destroy(c *transport.Conn, object, method uint16, writeCmd uint32, handle uint32) error {
	cmd := getCmd()
	defer putCmd(cmd)
	if ok, err := c.Supports(object, method); err != nil {
		return err
	} else if ok {
		cmd.Reset(object, method)
		cmd.IDR(0, handle)
		return c.Invoke(cmd)
	}
	ne.PutUint32(cmd.ResetWrite(writeCmd, false, 4, 0), handle)
	return c.Invoke(cmd)
}

// DeallocPD destroys a protection domain.
func DeallocPD(c *transport.Conn, handle uint32) error {
	return destroy(c, uapi.UVERBS_OBJECT_PD, uapi.UVERBS_METHOD_PD_DESTROY, uapi.IB_USER_VERBS_CMD_DEALLOC_PD, handle)
}

// MR is what REG_MR returns.
type MR struct {
	Handle, LKey, RKey uint32
}

// RegMR registers length bytes at addr with the device, seen at iova.
func RegMR(c *transport.Conn, pd uint32, addr unsafe.Pointer, length, iova uint64, access uint32) (MR, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	req := transport.As[uapi.IBUverbsRegMR](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_REG_MR, false,
		transport.SizeOf[uapi.IBUverbsRegMR](), transport.SizeOf[uapi.IBUverbsRegMRResp]()))
	req.Start = uapi.NewPointer(addr)
	req.Length = length
	req.HcaVa = iova
	req.PDHandle = pd
	req.AccessFlags = access
	if err := c.Invoke(cmd); err != nil {
		return MR{}, err
	}
	r := transport.As[uapi.IBUverbsRegMRResp](cmd.CoreOut())
	return MR{Handle: r.MRHandle, LKey: r.Lkey, RKey: r.Rkey}, nil
}

// DeregMR destroys a memory region.
func DeregMR(c *transport.Conn, handle uint32) error {
	return destroy(c, uapi.UVERBS_OBJECT_MR, uapi.UVERBS_METHOD_MR_DESTROY, uapi.IB_USER_VERBS_CMD_DEREG_MR, handle)
}

// Rereg flags (enum ib_mr_rereg_flags, ibv_rereg_mr's IBV_REREG_MR_CHANGE_*):
// what a REREG_MR changes.
const (
	ReregTranslation = 1 << 0
	ReregPD          = 1 << 1
	ReregAccess      = 1 << 2
)

// ReregMR changes a memory region in place: what flags name of its PD
// (pd), its access flags (access), and its memory (addr, length, iova).
// It returns the region's keys, new or kept.
func ReregMR(c *transport.Conn, handle, flags, pd uint32, addr unsafe.Pointer, length, iova uint64, access uint32) (lkey, rkey uint32, err error) {
	cmd := getCmd()
	defer putCmd(cmd)
	req := transport.As[uapi.IBUverbsReregMR](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_REREG_MR, false,
		transport.SizeOf[uapi.IBUverbsReregMR](), transport.SizeOf[uapi.IBUverbsReregMRResp]()))
	req.MRHandle = handle
	req.Flags = flags
	req.Start = uapi.NewPointer(addr)
	req.Length = length
	req.HcaVa = iova
	req.PDHandle = pd
	req.AccessFlags = access
	if err := c.Invoke(cmd); err != nil {
		return 0, 0, err
	}
	r := transport.As[uapi.IBUverbsReregMRResp](cmd.CoreOut())
	return r.Lkey, r.Rkey, nil
}

// AllocMW allocates a memory window of type typ (1 or 2) on a PD and
// returns its handle and rkey. Only a write command allocates one.
func AllocMW(c *transport.Conn, pd uint32, typ uint8) (handle, rkey uint32, err error) {
	cmd := getCmd()
	defer putCmd(cmd)
	req := transport.As[uapi.IBUverbsAllocMW](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_ALLOC_MW, false,
		transport.SizeOf[uapi.IBUverbsAllocMW](), transport.SizeOf[uapi.IBUverbsAllocMWResp]()))
	req.PDHandle = pd
	req.MWType = typ
	if err := c.Invoke(cmd); err != nil {
		return 0, 0, err
	}
	r := transport.As[uapi.IBUverbsAllocMWResp](cmd.CoreOut())
	return r.MWHandle, r.Rkey, nil
}

// DeallocMW destroys a memory window.
func DeallocMW(c *transport.Conn, handle uint32) error {
	return destroy(c, uapi.UVERBS_OBJECT_MW, uapi.UVERBS_METHOD_MW_DESTROY, uapi.IB_USER_VERBS_CMD_DEALLOC_MW, handle)
}

// AttachMcast attaches a UD QP to the multicast group gid (and, on
// InfiniBand, lid); DetachMcast detaches it. Only write commands do
// either.
func AttachMcast(c *transport.Conn, qp uint32, gid [16]byte, lid uint16) error {
	return mcast(c, uapi.IB_USER_VERBS_CMD_ATTACH_MCAST, qp, gid, lid)
}

// DetachMcast detaches a QP AttachMcast attached.
func DetachMcast(c *transport.Conn, qp uint32, gid [16]byte, lid uint16) error {
	return mcast(c, uapi.IB_USER_VERBS_CMD_DETACH_MCAST, qp, gid, lid)
}

func mcast(c *transport.Conn, write uint32, qp uint32, gid [16]byte, lid uint16) error {
	cmd := getCmd()
	defer putCmd(cmd)
	req := transport.As[uapi.IBUverbsAttachMcast](cmd.ResetWrite(write, false, transport.SizeOf[uapi.IBUverbsAttachMcast](), 0))
	req.GID = gid
	req.QPHandle = qp
	req.Mlid = lid
	return c.Invoke(cmd)
}

// CreateCompChannel creates a completion channel and returns its fd.
func CreateCompChannel(c *transport.Conn) (int, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, false,
		transport.SizeOf[uapi.IBUverbsCreateCompChannel](), transport.SizeOf[uapi.IBUverbsCreateCompChannelResp]())
	if err := c.Invoke(cmd); err != nil {
		return -1, err
	}
	return int(int32(transport.As[uapi.IBUverbsCreateCompChannelResp](cmd.CoreOut()).FD)), nil
}

// CQReq is what CQ creation takes from the caller.
type CQReq struct {
	CQE        uint32
	UserHandle uint64
	Channel    int // completion channel fd, or -1
	Vector     uint32
	Flags      uint32 // UVERBS_ATTR_CREATE_CQ_FLAGS (ib_uverbs_ex_create_cq_flags); 0 for none
}

// CQ is what CQ creation returns.
type CQ struct {
	Handle uint32
	CQE    uint32 // the size the kernel made, at least the request
}

// CreateCQ creates a completion queue with the driver's data: by the
// CQ_CREATE ioctl, or the legacy CREATE_CQ write on kernels without it.
func CreateCQ(c *transport.Conn, r CQReq, uhwIn, uhwOut []byte) (CQ, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	ok, err := c.Supports(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_CREATE)
	if err != nil {
		return CQ{}, err
	}
	if !ok {
		return createCQWrite(c, cmd, r, uhwIn, uhwOut)
	}
	cmd.Reset(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_CREATE)
	s := cmd.IDRNew(uapi.UVERBS_ATTR_CREATE_CQ_HANDLE)
	cmd.InU32(uapi.UVERBS_ATTR_CREATE_CQ_CQE, r.CQE)
	cmd.InU64(uapi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, r.UserHandle)
	if r.Channel >= 0 {
		cmd.FD(uapi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, int32(r.Channel))
	}
	cmd.InU32(uapi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, r.Vector)
	if r.Flags != 0 {
		cmd.Flags32(uapi.UVERBS_ATTR_CREATE_CQ_FLAGS, r.Flags)
	}
	cqe := cmd.Out(uapi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, 4, true)
	uo := ioctlUHW(cmd, uhwIn, len(uhwOut))
	if err := c.Invoke(cmd); err != nil {
		return CQ{}, err
	}
	out := CQ{Handle: cmd.NewHandle(s)}
	if b := cmd.Output(cqe); b != nil {
		out.CQE = ne.Uint32(b)
	}
	copy(uhwOut, cmd.Output(uo))
	return out, nil
}

// createCQWrite is CreateCQ by the legacy CREATE_CQ write command.
func createCQWrite(c *transport.Conn, cmd *transport.Cmd, r CQReq, uhwIn, uhwOut []byte) (CQ, error) {
	if r.Flags != 0 {
		return CQ{}, errs.NewUnsupported("CQ_CREATE ioctl (needed for CQ flags)", "4.17", unix.EOPNOTSUPP)
	}
	req := transport.As[uapi.IBUverbsCreateCQ](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_CREATE_CQ, false,
		transport.SizeOf[uapi.IBUverbsCreateCQ](), transport.SizeOf[uapi.IBUverbsCreateCQResp]()))
	req.UserHandle = r.UserHandle
	req.CQE = r.CQE
	req.CompVector = r.Vector
	req.CompChannel = int32(r.Channel)
	out := writeUHW(cmd, uhwIn, len(uhwOut))
	if err := c.Invoke(cmd); err != nil {
		return CQ{}, err
	}
	resp := transport.As[uapi.IBUverbsCreateCQResp](cmd.CoreOut())
	copy(uhwOut, out)
	return CQ{Handle: resp.CQHandle, CQE: resp.CQE}, nil
}

// Events are the event counts a destroy reports.
type Events struct {
	Comp, Async uint32
}

// DestroyCQ destroys a completion queue and returns how many completion
// and async events the kernel reported for it: ibv_destroy_cq waits for
// the application to have acknowledged as many.
func DestroyCQ(c *transport.Conn, handle uint32) (Events, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	if ok, err := c.Supports(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY); err != nil {
		return Events{}, err
	} else if ok {
		cmd.Reset(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY)
		cmd.IDR(uapi.UVERBS_ATTR_DESTROY_CQ_HANDLE, handle)
		o := cmd.Out(uapi.UVERBS_ATTR_DESTROY_CQ_RESP, transport.SizeOf[uapi.IBUverbsDestroyCQResp](), true)
		if err := c.Invoke(cmd); err != nil {
			return Events{}, err
		}
		r, err := transport.OutputAs[uapi.IBUverbsDestroyCQResp](cmd, o)
		if err != nil {
			return Events{}, err
		}
		return Events{Comp: r.CompEventsReported, Async: r.AsyncEventsReported}, nil
	}
	req := transport.As[uapi.IBUverbsDestroyCQ](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_DESTROY_CQ, false,
		transport.SizeOf[uapi.IBUverbsDestroyCQ](), transport.SizeOf[uapi.IBUverbsDestroyCQResp]()))
	req.CQHandle = handle
	if err := c.Invoke(cmd); err != nil {
		return Events{}, err
	}
	r := transport.As[uapi.IBUverbsDestroyCQResp](cmd.CoreOut())
	return Events{Comp: r.CompEventsReported, Async: r.AsyncEventsReported}, nil
}

// ReqNotifyCQ arms a CQ for its next completion, or its next solicited
// one. It is on the data path: it allocates nothing, using the caller's
// cmd, which must not be shared with a concurrent call.
func ReqNotifyCQ(c *transport.Conn, cmd *transport.Cmd, handle uint32, solicitedOnly bool) error {
	req := transport.As[uapi.IBUverbsReqNotifyCQ](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, false,
		transport.SizeOf[uapi.IBUverbsReqNotifyCQ](), 0))
	req.CQHandle = handle
	if solicitedOnly {
		req.SolicitedOnly = 1
	}
	cmd.Short() // the kernel only sets the CQ's arm flag
	return c.Invoke(cmd)
}

// CQArm holds a CQ's two REQ_NOTIFY_CQ commands, for the next and for the
// next solicited completion, each built by its first Arm and sent again
// as it is by the later ones (transport.Conn.Resend): arming builds
// nothing, as rxe's send doorbell (SendDoorbell). Not for concurrent use.
type CQArm struct {
	handle uint32
	cmds   [2]transport.Cmd // next, solicited
}

// NewCQArm returns the arm commands of the CQ with this handle.
func NewCQArm(handle uint32) *CQArm { return &CQArm{handle: handle} }

// Arm arms the CQ, as ReqNotifyCQ.
func (a *CQArm) Arm(c *transport.Conn, solicitedOnly bool) error {
	cmd := &a.cmds[0]
	if solicitedOnly {
		cmd = &a.cmds[1]
	}
	if cmd.Sent() {
		return c.Resend(cmd)
	}
	return ReqNotifyCQ(c, cmd, a.handle, solicitedOnly)
}

// sizeofIBVSendWR is sizeof(struct ibv_send_wr) on 64-bit hosts, the
// wqe_size rdma-core sends with rxe's doorbell; kernels since 2026 refuse
// anything below sizeof(struct ib_uverbs_send_wr) (56).
const sizeofIBVSendWR = 128

// SendDoorbell tells the kernel that a user QP's send queue has new work:
// a POST_SEND write command with no work requests, through write(2), as
// rxe expects. The command never changes for a QP, so it is built once,
// with room for the kernel's reply, and each Ring sends it as it is.
// It must stay where NewSendDoorbell put it (the command holds the
// address of its reply): keep the pointer.
type SendDoorbell struct {
	msg  [8 + unsafe.Sizeof(uapi.IBUverbsPostSend{})]byte // struct ib_uverbs_cmd_hdr, then the command
	resp uapi.IBUverbsPostSendResp
}

// NewSendDoorbell builds the doorbell of the QP with this handle.
func NewSendDoorbell(qp uint32) *SendDoorbell {
	d := new(SendDoorbell)
	ne := binary.NativeEndian
	ne.PutUint32(d.msg[0:], uapi.IB_USER_VERBS_CMD_POST_SEND)
	ne.PutUint16(d.msg[4:], uint16(len(d.msg)/4))            // in_words, the header included
	ne.PutUint16(d.msg[6:], uint16(unsafe.Sizeof(d.resp)/4)) // out_words
	var req uapi.IBUverbsPostSend
	ne.PutUint64(d.msg[8+unsafe.Offsetof(req.Response):], uint64(uintptr(unsafe.Pointer(&d.resp))))
	ne.PutUint32(d.msg[8+unsafe.Offsetof(req.QPHandle):], qp)
	ne.PutUint32(d.msg[8+unsafe.Offsetof(req.WqeSize):], sizeofIBVSendWR) // wr_count, sge_count: 0
	return d
}

// Ring sends the doorbell (transport.Conn.WriteShort). rxe schedules the
// send queue, and 6.1 runs it inline, sending the packets before the
// write returns, so it goes through syscall.Syscall, not RawSyscall. It
// allocates nothing.
func (d *SendDoorbell) Ring(c *transport.Conn) error {
	err := c.WriteShort(d.msg[:])
	runtime.KeepAlive(d) // the kernel wrote its reply into d.resp
	return err
}

// RingQuick is Ring through transport.Conn.WriteQuick (RawSyscall), for a
// doorbell the caller knows sends little: rxe's for one small request on
// an empty queue. It allocates nothing.
func (d *SendDoorbell) RingQuick(c *transport.Conn) error {
	err := c.WriteQuick(d.msg[:])
	runtime.KeepAlive(d) // the kernel wrote its reply into d.resp
	return err
}

// ResizeCQ asks the kernel to resize a CQ to at least cqe entries and
// returns the new size, with the driver's data uhwIn; the driver's
// response is copied into uhwOut.
func ResizeCQ(c *transport.Conn, handle, cqe uint32, uhwIn, uhwOut []byte) (uint32, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	req := transport.As[uapi.IBUverbsResizeCQ](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_RESIZE_CQ, false,
		transport.SizeOf[uapi.IBUverbsResizeCQ](), transport.SizeOf[uapi.IBUverbsResizeCQResp]()))
	req.CQHandle = handle
	req.CQE = cqe
	out := writeUHW(cmd, uhwIn, len(uhwOut))
	if err := c.Invoke(cmd); err != nil {
		return 0, err
	}
	copy(uhwOut, out)
	return transport.As[uapi.IBUverbsResizeCQResp](cmd.CoreOut()).CQE, nil
}
