package kverbs

import (
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// QPCap is struct ib_uverbs_qp_cap: a QP's queue sizes.
type QPCap = uapi.IBUverbsQPCap

// QPReq is what QP creation takes.
type QPReq struct {
	PD             uint32
	SendCQ, RecvCQ uint32
	SRQ            uint32
	HasSRQ         bool
	UserHandle     uint64
	Type           uint8 // IB_UVERBS_QPT_RC, _UC, _UD
	SigAll         bool  // every send WR completes with a CQE
	Cap            QPCap
}

// QP is what QP creation returns.
type QP struct {
	Handle uint32
	QPN    uint32
	Cap    QPCap // what the kernel made, at least what was asked
}

// CreateQP creates a queue pair with the driver's data: by the QP_CREATE
// ioctl (kernel ≥ 5.8), else by the legacy CREATE_QP write command.
func CreateQP(c *transport.Conn, r QPReq, uhwIn, uhwOut []byte) (QP, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	if ok, err := c.Supports(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_CREATE); err != nil {
		return QP{}, err
	} else if ok {
		cmd.Reset(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_CREATE)
		s := cmd.IDRNew(uapi.UVERBS_ATTR_CREATE_QP_HANDLE)
		cmd.IDR(uapi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, r.PD)
		cmd.IDR(uapi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, r.SendCQ)
		cmd.IDR(uapi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, r.RecvCQ)
		if r.HasSRQ {
			cmd.IDR(uapi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, r.SRQ)
		}
		cmd.InU64(uapi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, r.UserHandle)
		*transport.As[QPCap](cmd.In(uapi.UVERBS_ATTR_CREATE_QP_CAP, transport.SizeOf[QPCap]())) = r.Cap
		cmd.Const(uapi.UVERBS_ATTR_CREATE_QP_TYPE, uint64(r.Type))
		if r.SigAll {
			cmd.Flags32(uapi.UVERBS_ATTR_CREATE_QP_FLAGS, uapi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL)
		}
		capOut := cmd.Out(uapi.UVERBS_ATTR_CREATE_QP_RESP_CAP, transport.SizeOf[QPCap](), true)
		qpn := cmd.Out(uapi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, 4, true)
		uo := ioctlUHW(cmd, uhwIn, len(uhwOut))
		if err := c.Invoke(cmd); err != nil {
			return QP{}, err
		}
		out := QP{Handle: cmd.NewHandle(s)}
		if b := cmd.Output(capOut); b != nil {
			out.Cap = *transport.As[QPCap](b)
		}
		if b := cmd.Output(qpn); b != nil {
			out.QPN = ne.Uint32(b)
		}
		copy(uhwOut, cmd.Output(uo))
		return out, nil
	}
	req := transport.As[uapi.IBUverbsCreateQP](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_CREATE_QP, false,
		transport.SizeOf[uapi.IBUverbsCreateQP](), transport.SizeOf[uapi.IBUverbsCreateQPResp]()))
	req.UserHandle = r.UserHandle
	req.PDHandle = r.PD
	req.SendCQHandle = r.SendCQ
	req.RecvCQHandle = r.RecvCQ
	req.SRQHandle = r.SRQ
	req.MaxSendWR, req.MaxRecvWR = r.Cap.MaxSendWR, r.Cap.MaxRecvWR
	req.MaxSendSGE, req.MaxRecvSGE = r.Cap.MaxSendSGE, r.Cap.MaxRecvSGE
	req.MaxInlineData = r.Cap.MaxInlineData
	if r.SigAll {
		req.SqSigAll = 1
	}
	req.QPType = r.Type
	if r.HasSRQ {
		req.IsSRQ = 1
	}
	out := writeUHW(cmd, uhwIn, len(uhwOut))
	if err := c.Invoke(cmd); err != nil {
		return QP{}, err
	}
	resp := transport.As[uapi.IBUverbsCreateQPResp](cmd.CoreOut())
	copy(uhwOut, out)
	return QP{Handle: resp.QPHandle, QPN: resp.QPN, Cap: QPCap{
		MaxSendWR: resp.MaxSendWR, MaxRecvWR: resp.MaxRecvWR,
		MaxSendSGE: resp.MaxSendSGE, MaxRecvSGE: resp.MaxRecvSGE, MaxInlineData: resp.MaxInlineData,
	}}, nil
}

// DestroyQP destroys a queue pair and returns how many async events the
// kernel reported for it.
func DestroyQP(c *transport.Conn, handle uint32) (uint32, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	if ok, err := c.Supports(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY); err != nil {
		return 0, err
	} else if ok {
		cmd.Reset(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY)
		cmd.IDR(uapi.UVERBS_ATTR_DESTROY_QP_HANDLE, handle)
		o := cmd.Out(uapi.UVERBS_ATTR_DESTROY_QP_RESP, transport.SizeOf[uapi.IBUverbsDestroyQPResp](), true)
		if err := c.Invoke(cmd); err != nil {
			return 0, err
		}
		r, err := transport.OutputAs[uapi.IBUverbsDestroyQPResp](cmd, o)
		if err != nil {
			return 0, err
		}
		return r.EventsReported, nil
	}
	req := transport.As[uapi.IBUverbsDestroyQP](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_DESTROY_QP, false,
		transport.SizeOf[uapi.IBUverbsDestroyQP](), transport.SizeOf[uapi.IBUverbsDestroyQPResp]()))
	req.QPHandle = handle
	if err := c.Invoke(cmd); err != nil {
		return 0, err
	}
	return transport.As[uapi.IBUverbsDestroyQPResp](cmd.CoreOut()).EventsReported, nil
}

// ModifyQP sends MODIFY_QP with m (its QPHandle and AttrMask set).
func ModifyQP(c *transport.Conn, m *uapi.IBUverbsModifyQP) error {
	cmd := getCmd()
	defer putCmd(cmd)
	*transport.As[uapi.IBUverbsModifyQP](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_MODIFY_QP, false,
		transport.SizeOf[uapi.IBUverbsModifyQP](), 0)) = *m
	return c.Invoke(cmd)
}

// QueryQP returns the attributes of a QP selected by mask.
func QueryQP(c *transport.Conn, handle, mask uint32) (uapi.IBUverbsQueryQPResp, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	req := transport.As[uapi.IBUverbsQueryQP](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_QUERY_QP, false,
		transport.SizeOf[uapi.IBUverbsQueryQP](), transport.SizeOf[uapi.IBUverbsQueryQPResp]()))
	req.QPHandle = handle
	req.AttrMask = mask
	if err := c.Invoke(cmd); err != nil {
		return uapi.IBUverbsQueryQPResp{}, err
	}
	return *transport.As[uapi.IBUverbsQueryQPResp](cmd.CoreOut()), nil
}

// CreateAH creates an address handle in pd; the driver's response is
// copied into uhwOut.
func CreateAH(c *transport.Conn, pd uint32, userHandle uint64, attr *uapi.IBUverbsAHAttr, uhwOut []byte) (uint32, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	req := transport.As[uapi.IBUverbsCreateAH](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_CREATE_AH, false,
		transport.SizeOf[uapi.IBUverbsCreateAH](), transport.SizeOf[uapi.IBUverbsCreateAHResp]()))
	req.UserHandle = userHandle
	req.PDHandle = pd
	req.Attr = *attr
	out := writeUHW(cmd, nil, len(uhwOut))
	if err := c.Invoke(cmd); err != nil {
		return 0, err
	}
	copy(uhwOut, out)
	return transport.As[uapi.IBUverbsCreateAHResp](cmd.CoreOut()).AHHandle, nil
}

// DestroyAH destroys an address handle.
func DestroyAH(c *transport.Conn, handle uint32) error {
	return destroy(c, uapi.UVERBS_OBJECT_AH, uapi.UVERBS_METHOD_AH_DESTROY, uapi.IB_USER_VERBS_CMD_DESTROY_AH, handle)
}
