package kverbs

import (
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// SRQReq is what shared receive queue creation takes: a basic SRQ (not
// XRC, not tag matching) in PD.
type SRQReq struct {
	PD         uint32
	UserHandle uint64 // async events name the SRQ by it
	MaxWR      uint32
	MaxSGE     uint32
	Limit      uint32 // the limit event's threshold; 0: not armed
}

// SRQ is what SRQ creation returns.
type SRQ struct {
	Handle uint32
	// SRQN is the core's SRQ number, which the kernel gives for an XRC
	// SRQ alone (0 here): a basic SRQ's is in the driver's response.
	SRQN   uint32
	MaxWR  uint32 // at least what was asked (6.1's SRQ_CREATE: exactly; Query: what was made)
	MaxSGE uint32
}

// SRQAttr is what QuerySRQ returns and ModifySRQ changes
// (struct ib_srq_attr).
type SRQAttr struct {
	MaxWR, MaxSGE, Limit uint32
}

// The attributes ModifySRQ changes (enum ib_srq_attr_mask).
const (
	SRQMaxWR = 1 << 0 // resize the SRQ to MaxWR receives
	SRQLimit = 1 << 1 // arm the limit event at Limit
)

// CreateSRQ creates a shared receive queue with the driver's data: by the
// SRQ_CREATE ioctl where the kernel has it, else by the legacy
// CREATE_SRQ write command.
func CreateSRQ(c *transport.Conn, r SRQReq, uhwIn, uhwOut []byte) (SRQ, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	if ok, err := c.Supports(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE); err != nil {
		return SRQ{}, err
	} else if ok {
		cmd.Reset(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE)
		s := cmd.IDRNew(uapi.UVERBS_ATTR_CREATE_SRQ_HANDLE)
		cmd.IDR(uapi.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, r.PD)
		cmd.InU64(uapi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, r.UserHandle)
		cmd.InU32(uapi.UVERBS_ATTR_CREATE_SRQ_MAX_WR, r.MaxWR)
		cmd.InU32(uapi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, r.MaxSGE)
		cmd.InU32(uapi.UVERBS_ATTR_CREATE_SRQ_LIMIT, r.Limit)
		cmd.Const(uapi.UVERBS_ATTR_CREATE_SRQ_TYPE, uapi.IB_UVERBS_SRQT_BASIC)
		maxWR := cmd.Out(uapi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, 4, true)
		maxSGE := cmd.Out(uapi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, 4, true)
		num := cmd.Out(uapi.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, 4, true)
		uo := ioctlUHW(cmd, uhwIn, len(uhwOut))
		if err := c.Invoke(cmd); err != nil {
			return SRQ{}, err
		}
		out := SRQ{Handle: cmd.NewHandle(s)}
		if b := cmd.Output(maxWR); b != nil {
			out.MaxWR = ne.Uint32(b)
		}
		if b := cmd.Output(maxSGE); b != nil {
			out.MaxSGE = ne.Uint32(b)
		}
		if b := cmd.Output(num); b != nil {
			out.SRQN = ne.Uint32(b)
		}
		copy(uhwOut, cmd.Output(uo))
		return out, nil
	}
	req := transport.As[uapi.IBUverbsCreateSRQ](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_CREATE_SRQ, false,
		transport.SizeOf[uapi.IBUverbsCreateSRQ](), transport.SizeOf[uapi.IBUverbsCreateSRQResp]()))
	req.UserHandle = r.UserHandle
	req.PDHandle = r.PD
	req.MaxWR, req.MaxSGE, req.SRQLimit = r.MaxWR, r.MaxSGE, r.Limit
	out := writeUHW(cmd, uhwIn, len(uhwOut))
	if err := c.Invoke(cmd); err != nil {
		return SRQ{}, err
	}
	resp := transport.As[uapi.IBUverbsCreateSRQResp](cmd.CoreOut())
	copy(uhwOut, out)
	return SRQ{Handle: resp.SRQHandle, SRQN: resp.Srqn, MaxWR: resp.MaxWR, MaxSGE: resp.MaxSGE}, nil
}

// DestroySRQ destroys a shared receive queue and returns how many async
// events the kernel reported for it. The kernel refuses (EBUSY) while a
// QP still receives through it.
func DestroySRQ(c *transport.Conn, handle uint32) (uint32, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	if ok, err := c.Supports(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_DESTROY); err != nil {
		return 0, err
	} else if ok {
		cmd.Reset(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_DESTROY)
		cmd.IDR(uapi.UVERBS_ATTR_DESTROY_SRQ_HANDLE, handle)
		o := cmd.Out(uapi.UVERBS_ATTR_DESTROY_SRQ_RESP, transport.SizeOf[uapi.IBUverbsDestroySRQResp](), true)
		if err := c.Invoke(cmd); err != nil {
			return 0, err
		}
		r, err := transport.OutputAs[uapi.IBUverbsDestroySRQResp](cmd, o)
		if err != nil {
			return 0, err
		}
		return r.EventsReported, nil
	}
	req := transport.As[uapi.IBUverbsDestroySRQ](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_DESTROY_SRQ, false,
		transport.SizeOf[uapi.IBUverbsDestroySRQ](), transport.SizeOf[uapi.IBUverbsDestroySRQResp]()))
	req.SRQHandle = handle
	if err := c.Invoke(cmd); err != nil {
		return 0, err
	}
	return transport.As[uapi.IBUverbsDestroySRQResp](cmd.CoreOut()).EventsReported, nil
}

// ModifySRQ changes the attributes of an SRQ that mask selects (SRQMaxWR,
// SRQLimit), with the driver's data uhwIn (rxe's names where the kernel
// writes a resized queue's new mmap information). The kernel has only
// the write command for it.
func ModifySRQ(c *transport.Conn, handle, mask uint32, a SRQAttr, uhwIn []byte) error {
	cmd := getCmd()
	defer putCmd(cmd)
	req := transport.As[uapi.IBUverbsModifySRQ](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_MODIFY_SRQ, false,
		transport.SizeOf[uapi.IBUverbsModifySRQ](), 0))
	req.SRQHandle = handle
	req.AttrMask = mask
	req.MaxWR, req.SRQLimit = a.MaxWR, a.Limit
	writeUHW(cmd, uhwIn, 0)
	return c.Invoke(cmd)
}

// QuerySRQ returns an SRQ's attributes: its size, SGEs and the limit
// armed (0 once the limit event fired). The kernel has only the write
// command for it.
func QuerySRQ(c *transport.Conn, handle uint32) (SRQAttr, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	req := transport.As[uapi.IBUverbsQuerySRQ](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_QUERY_SRQ, false,
		transport.SizeOf[uapi.IBUverbsQuerySRQ](), transport.SizeOf[uapi.IBUverbsQuerySRQResp]()))
	req.SRQHandle = handle
	if err := c.Invoke(cmd); err != nil {
		return SRQAttr{}, err
	}
	r := transport.As[uapi.IBUverbsQuerySRQResp](cmd.CoreOut())
	return SRQAttr{MaxWR: r.MaxWR, MaxSGE: r.MaxSGE, Limit: r.SRQLimit}, nil
}
