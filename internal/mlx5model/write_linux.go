package mlx5model

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// Write commands, reached through UVERBS_METHOD_INVOKE_WRITE: the core
// request in CORE_IN (its leading `response` member ignored), the core
// response to CORE_OUT, the driver's data in UHW_IN/UHW_OUT.

// wargs is one write command being answered.
type wargs struct {
	*args
	in, out      []byte // core request and response buffers (out nil when absent)
	uhwIn        []byte
	uhwOutLen    int
	uhwOut       []byte // what the driver answers, written to UHW_OUT on success
	wroteCoreOut bool
}

// respond writes the core response.
func (w *wargs) respond(b []byte) {
	clear(w.out)
	copy(w.out, b)
	w.wroteCoreOut = true
}

type writeCmd struct {
	req, resp int // core sizes; CORE_IN/OUT shorter give ENOSPC
	handle    func(w *wargs) unix.Errno
}

var writeCmds = map[uint32]writeCmd{
	uapi.IB_USER_VERBS_CMD_QUERY_DEVICE: {8, int(unsafe.Sizeof(uapi.IBUverbsQueryDeviceResp{})), func(w *wargs) unix.Errno {
		r := deviceAttr()
		w.respond(structBytes(&r))
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_FLAG_EXTENDED | uapi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE: {
		int(unsafe.Sizeof(uapi.IBUverbsExQueryDevice{})),
		int(unsafe.Offsetof(uapi.IBUverbsExQueryDeviceResp{}.ResponseLength)) + 4, exQueryDevice},
	uapi.IB_USER_VERBS_CMD_QUERY_PORT: {int(unsafe.Sizeof(uapi.IBUverbsQueryPort{})), int(unsafe.Sizeof(uapi.IBUverbsQueryPortResp{})), func(w *wargs) unix.Errno {
		req := view[uapi.IBUverbsQueryPort](w.in)
		if req.PortNum != 1 {
			return unix.EINVAL
		}
		r := portAttr()
		w.respond(structBytes(&r.LegacyResp))
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_ALLOC_PD: {8, 4, func(w *wargs) unix.Errno {
		p := &pd{}
		p.handle = w.c.newHandle(p)
		w.respond(u32b(p.handle))
		if w.uhwOutLen >= 4 {
			w.uhwOut = u32b(0x10 + p.handle) // mlx5_ib_alloc_pd_resp.pdn
		}
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_DEALLOC_PD: {4, 0, func(w *wargs) unix.Errno {
		return w.c.deallocPD(ne32(w.in))
	}},
	uapi.IB_USER_VERBS_CMD_REG_MR: {int(unsafe.Sizeof(uapi.IBUverbsRegMR{})), int(unsafe.Sizeof(uapi.IBUverbsRegMRResp{})), func(w *wargs) unix.Errno {
		m, e := w.c.regMR(view[uapi.IBUverbsRegMR](w.in))
		if e != 0 {
			return e
		}
		r := uapi.IBUverbsRegMRResp{MRHandle: m.handle, Lkey: m.key, Rkey: m.key}
		w.respond(structBytes(&r))
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_DEREG_MR: {4, 0, func(w *wargs) unix.Errno { return w.c.deregMR(ne32(w.in)) }},
	uapi.IB_USER_VERBS_CMD_ALLOC_MW: {int(unsafe.Sizeof(uapi.IBUverbsAllocMW{})), int(unsafe.Sizeof(uapi.IBUverbsAllocMWResp{})), func(w *wargs) unix.Errno {
		m, e := w.c.allocMW(view[uapi.IBUverbsAllocMW](w.in), w.uhwIn)
		if e != 0 {
			return e
		}
		r := uapi.IBUverbsAllocMWResp{MWHandle: m.handle, Rkey: m.key}
		w.respond(structBytes(&r))
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_DEALLOC_MW: {4, 0, func(w *wargs) unix.Errno { return w.c.deallocMW(ne32(w.in)) }},
	uapi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: {8, 4, func(w *wargs) unix.Errno {
		p, err := newEventPipe(int(unsafe.Sizeof(uapi.IBUverbsCompEventDesc{})))
		if err != nil {
			return unix.EMFILE
		}
		// The kernel's channel fd blocks until the library makes it not.
		if err := unix.SetNonblock(p.r, false); err != nil {
			p.close()
			unix.Close(p.r)
			return unix.EIO
		}
		w.c.channels[p.r] = p
		w.respond(u32b(uint32(p.r)))
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_CREATE_CQ: {int(unsafe.Sizeof(uapi.IBUverbsCreateCQ{})), int(unsafe.Sizeof(uapi.IBUverbsCreateCQResp{})), func(w *wargs) unix.Errno {
		req := view[uapi.IBUverbsCreateCQ](w.in)
		q, out, e := w.c.createCQ(cqReq{cqe: req.CQE, user: req.UserHandle, channel: int(req.CompChannel),
			vector: req.CompVector}, w.uhwIn, w.uhwOutLen)
		if e != 0 {
			return e
		}
		r := uapi.IBUverbsCreateCQResp{CQHandle: q.handle, CQE: q.ncqe - 1}
		w.respond(structBytes(&r))
		w.uhwOut = out
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_RESIZE_CQ: {int(unsafe.Sizeof(uapi.IBUverbsResizeCQ{})), int(unsafe.Sizeof(uapi.IBUverbsResizeCQResp{})), func(w *wargs) unix.Errno {
		req := view[uapi.IBUverbsResizeCQ](w.in)
		n, e := w.c.resizeCQ(req.CQHandle, req.CQE, w.uhwIn)
		if e != 0 {
			return e
		}
		r := uapi.IBUverbsResizeCQResp{CQE: n}
		w.respond(structBytes(&r))
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_DESTROY_CQ: {int(unsafe.Sizeof(uapi.IBUverbsDestroyCQ{})), int(unsafe.Sizeof(uapi.IBUverbsDestroyCQResp{})), func(w *wargs) unix.Errno {
		req := view[uapi.IBUverbsDestroyCQ](w.in)
		r, e := w.c.destroyCQHandle(req.CQHandle)
		if e != 0 {
			return e
		}
		w.respond(structBytes(&r))
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ: {int(unsafe.Sizeof(uapi.IBUverbsReqNotifyCQ{})), 0, func(w *wargs) unix.Errno {
		req := view[uapi.IBUverbsReqNotifyCQ](w.in)
		q, ok := w.c.handles[req.CQHandle].(*cq)
		if !ok {
			return unix.EINVAL
		}
		// mlx5_ib_arm_cq rings the doorbell from the kernel, with the
		// kernel's own sequence number: the CQ's current one.
		w.c.d.arm(q, q.seq&3, req.SolicitedOnly != 0, q.pi)
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_CREATE_QP: {int(unsafe.Sizeof(uapi.IBUverbsCreateQP{})), int(unsafe.Sizeof(uapi.IBUverbsCreateQPResp{})), func(w *wargs) unix.Errno {
		req := view[uapi.IBUverbsCreateQP](w.in)
		q, out, e := w.c.createQP(qpReq{pd: req.PDHandle, send: req.SendCQHandle, recv: req.RecvCQHandle,
			srq: req.SRQHandle, hasSRQ: req.IsSRQ != 0,
			user: req.UserHandle, typ: req.QPType, sigAll: req.SqSigAll != 0,
			cap: uapi.IBUverbsQPCap{MaxSendWR: req.MaxSendWR, MaxRecvWR: req.MaxRecvWR, MaxSendSGE: req.MaxSendSGE,
				MaxRecvSGE: req.MaxRecvSGE, MaxInlineData: req.MaxInlineData}}, w.uhwIn, w.uhwOutLen)
		if e != 0 {
			return e
		}
		r := uapi.IBUverbsCreateQPResp{QPHandle: q.handle, QPN: q.qpn, MaxSendWR: q.cap.MaxSendWR, MaxRecvWR: q.cap.MaxRecvWR,
			MaxSendSGE: q.cap.MaxSendSGE, MaxRecvSGE: q.cap.MaxRecvSGE, MaxInlineData: q.cap.MaxInlineData}
		w.respond(structBytes(&r))
		w.uhwOut = out
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_MODIFY_QP: {int(unsafe.Sizeof(uapi.IBUverbsModifyQP{})), 0, func(w *wargs) unix.Errno {
		return w.c.modifyQP(view[uapi.IBUverbsModifyQP](w.in))
	}},
	uapi.IB_USER_VERBS_CMD_QUERY_QP: {int(unsafe.Sizeof(uapi.IBUverbsQueryQP{})), int(unsafe.Sizeof(uapi.IBUverbsQueryQPResp{})), func(w *wargs) unix.Errno {
		req := view[uapi.IBUverbsQueryQP](w.in)
		r, e := w.c.queryQP(req.QPHandle)
		if e != 0 {
			return e
		}
		w.respond(structBytes(&r))
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_DESTROY_QP: {int(unsafe.Sizeof(uapi.IBUverbsDestroyQP{})), int(unsafe.Sizeof(uapi.IBUverbsDestroyQPResp{})), func(w *wargs) unix.Errno {
		req := view[uapi.IBUverbsDestroyQP](w.in)
		n, e := w.c.destroyQPHandle(req.QPHandle)
		if e != 0 {
			return e
		}
		w.respond(u32b(n))
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_CREATE_SRQ: {int(unsafe.Sizeof(uapi.IBUverbsCreateSRQ{})), int(unsafe.Sizeof(uapi.IBUverbsCreateSRQResp{})), func(w *wargs) unix.Errno {
		req := view[uapi.IBUverbsCreateSRQ](w.in)
		s, out, e := w.c.createSRQ(srqReq{pd: req.PDHandle, user: req.UserHandle, maxWR: req.MaxWR, maxSGE: req.MaxSGE},
			w.uhwIn, w.uhwOutLen)
		if e != 0 {
			return e
		}
		r := uapi.IBUverbsCreateSRQResp{SRQHandle: s.handle, MaxWR: s.cnt - 1, MaxSGE: s.maxGS}
		w.respond(structBytes(&r))
		w.uhwOut = out
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_MODIFY_SRQ: {int(unsafe.Sizeof(uapi.IBUverbsModifySRQ{})), 0, func(w *wargs) unix.Errno {
		return w.c.modifySRQ(view[uapi.IBUverbsModifySRQ](w.in))
	}},
	uapi.IB_USER_VERBS_CMD_QUERY_SRQ: {int(unsafe.Sizeof(uapi.IBUverbsQuerySRQ{})), int(unsafe.Sizeof(uapi.IBUverbsQuerySRQResp{})), func(w *wargs) unix.Errno {
		r, e := w.c.querySRQ(view[uapi.IBUverbsQuerySRQ](w.in).SRQHandle)
		if e != 0 {
			return e
		}
		w.respond(structBytes(&r))
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_DESTROY_SRQ: {int(unsafe.Sizeof(uapi.IBUverbsDestroySRQ{})), int(unsafe.Sizeof(uapi.IBUverbsDestroySRQResp{})), func(w *wargs) unix.Errno {
		n, e := w.c.destroySRQHandle(view[uapi.IBUverbsDestroySRQ](w.in).SRQHandle)
		if e != 0 {
			return e
		}
		w.respond(u32b(n))
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_CREATE_AH: {int(unsafe.Sizeof(uapi.IBUverbsCreateAH{})), int(unsafe.Sizeof(uapi.IBUverbsCreateAHResp{})), func(w *wargs) unix.Errno {
		req := view[uapi.IBUverbsCreateAH](w.in)
		x, out, e := w.c.createAH(req.PDHandle, &req.Attr, w.uhwOutLen)
		if e != 0 {
			return e
		}
		w.respond(u32b(x.handle))
		w.uhwOut = out
		return 0
	}},
	uapi.IB_USER_VERBS_CMD_DESTROY_AH: {4, 0, func(w *wargs) unix.Errno { return w.c.destroyAH(ne32(w.in)) }},
	uapi.IB_USER_VERBS_CMD_POST_SEND: {int(unsafe.Sizeof(uapi.IBUverbsPostSend{})), 4, func(w *wargs) unix.Errno {
		return unix.EINVAL // user QPs post in their rings; the kernel has none of their WQEs
	}},
	uapi.IB_USER_VERBS_CMD_POST_RECV: {int(unsafe.Sizeof(uapi.IBUverbsPostRecv{})), 4, func(w *wargs) unix.Errno {
		return unix.EINVAL
	}},
}

func ne32(b []byte) uint32 { return binary.NativeEndian.Uint32(b) }

func exQueryDevice(w *wargs) unix.Errno {
	req := view[uapi.IBUverbsExQueryDevice](w.in)
	if req.CompMask != 0 || req.Reserved != 0 {
		return unix.EINVAL
	}
	r := uapi.IBUverbsExQueryDeviceResp{
		Base:             deviceAttr(),
		ResponseLength:   uint32(min(len(w.out), int(unsafe.Sizeof(uapi.IBUverbsExQueryDeviceResp{})))),
		TimestampMask:    timestampMask,
		HcaCoreClock:     1000000, // kHz
		DeviceCapFlagsEx: 0,
		MaxWQTypeRq:      1 << 24,
		CQModerationCaps: uapi.IBUverbsCQModerationCaps{MaxCQModerationCount: 1<<16 - 1, MaxCQModerationPeriod: 1<<12 - 1},
	}
	w.respond(structBytes(&r))
	if w.uhwOutLen > 0 {
		m := uapi.Mlx5IBQueryDeviceResp{ResponseLength: uint32(min(w.uhwOutLen, int(unsafe.Sizeof(uapi.Mlx5IBQueryDeviceResp{}))))}
		w.uhwOut = structBytes(&m)
	}
	return 0
}

// invokeWrite is UVERBS_METHOD_INVOKE_WRITE.
func invokeWrite(a *args) unix.Errno { return runWrite(a, writeCmds) }

// runWrite answers UVERBS_METHOD_INVOKE_WRITE from the command table cmds.
func runWrite(a *args, cmds map[uint32]writeCmd) unix.Errno {
	cmd := uint32(a.val(uapi.UVERBS_ATTR_WRITE_CMD))
	wc, ok := cmds[cmd]
	if !ok {
		return unix.EOPNOTSUPP
	}
	in, ok := a.in(uapi.UVERBS_ATTR_CORE_IN)
	if !ok {
		return unix.EFAULT
	}
	if len(in) < wc.req {
		return unix.ENOSPC
	}
	w := &wargs{args: a, in: in}
	if n := a.outLen(uapi.UVERBS_ATTR_CORE_OUT); n >= 0 {
		i := a.idx[uapi.UVERBS_ATTR_CORE_OUT]
		w.out = a.mem(a.attrs[i].Data, n)
		if w.out == nil && n > 0 {
			return unix.EFAULT
		}
	}
	if len(w.out) < wc.resp {
		return unix.ENOSPC
	}
	// Every command but GET_CONTEXT and the queries needs the ucontext.
	if !a.c.ucontext && cmd != uapi.IB_USER_VERBS_CMD_GET_CONTEXT {
		return unix.EINVAL
	}
	if w.uhwIn, ok = a.in(uapi.UVERBS_ATTR_UHW_IN); !ok {
		return unix.EFAULT
	}
	w.uhwOutLen = max(a.outLen(uapi.UVERBS_ATTR_UHW_OUT), 0)
	if e := wc.handle(w); e != 0 {
		return e
	}
	if w.wroteCoreOut {
		i := a.idx[uapi.UVERBS_ATTR_CORE_OUT]
		a.attrs[i].Flags |= uapi.UVERBS_ATTR_F_VALID_OUTPUT
	}
	if w.uhwOut != nil {
		a.out(uapi.UVERBS_ATTR_UHW_OUT, w.uhwOut)
	}
	return 0
}
