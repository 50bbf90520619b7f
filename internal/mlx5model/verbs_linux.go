package mlx5model

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// The device the model is: one RoCE port, ConnectX-6 Dx-like answers.
const (
	vendorID     = 0x02c9
	vendorPartID = 4125 // ConnectX-6 Dx
	fwVer        = 22<<32 | 36<<16 | 1010
	maxQPWR      = 1 << 15
	maxSGE       = 30
	maxCQE       = 1<<22 - 1 // 4194303
	logMaxCQ     = 22
	maxQP        = 1 << 18
	maxRdAtom    = 16
	maxInline    = 512
	maxRqDesc    = 512 // max_wqe_sz_rq: bytes a receive WQE may take
	gidTableLen  = 255
	pkeyTableLen = 1
	portMaxMsg   = 1 << 30
	mtu1024      = 3 // IB_MTU_1024: the active MTU of a 1500-byte Ethernet port
	mtu4096      = 5
	maxBfregs    = 512 // MLX5_MAX_BFREGS for static UARs

	// Dynamic UARs are mmapped from page 9<<16 of the fd on (the
	// kernel's MLX5_IB_MMAP_OFFSET_START), one page each.
	dynUARFirstPage = 9 << 16
	maxDynUARs      = 256
)

// The port's MAC and GIDs, as rxe's are on the VM's d0 (192.0.2.1): index
// 0 the link-local GID from the MAC, index 1 the IPv4-mapped one, both
// RoCE v2.
var (
	portMAC = [6]byte{0x02, 0x00, 0x5e, 0x00, 0x53, 0x01}
	gids    = [2][16]byte{
		{0xfe, 0x80, 8: 0x00, 0x00, 0x5e, 0xff, 0xfe, 0x00, 0x53, 0x01},
		netip.MustParseAddr("::ffff:192.0.2.1").As16(),
	}
	nodeGUID = [8]byte{0x00, 0x00, 0x5e, 0xff, 0xfe, 0x00, 0x53, 0x01}
)

func init() { gids[0][8] = portMAC[0] ^ 0x02 } // EUI-64: flip the U/L bit

// gidIndex returns the index of a GID of the port, or -1.
func gidIndex(g [16]byte) int {
	for i, x := range gids {
		if x == g {
			return i
		}
	}
	return -1
}

var (
	methodsOnce       sync.Once
	methodTable       map[uint32]*method
	methodTableStatic map[uint32]*method // without the UAR driver object
)

func buildMethods() {
	t := map[uint32]*method{
		key(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INVOKE_WRITE): {
			noCtx: true, udata: true, handle: invokeWrite,
			attrs: []attrSpec{
				{id: uapi.UVERBS_ATTR_CORE_IN, kind: kPtrIn},
				{id: uapi.UVERBS_ATTR_CORE_OUT, kind: kPtrOut},
				{id: uapi.UVERBS_ATTR_WRITE_CMD, kind: kConst, mandatory: true},
			}},
		key(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_GET_CONTEXT): {
			noCtx: true, udata: true, handle: getContext,
			attrs: []attrSpec{
				{id: uapi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, kind: kPtrOut, min: 4},
				{id: uapi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, kind: kPtrOut, min: 8},
			}},
		key(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_PORT): {
			handle: queryPortIoctl,
			attrs: []attrSpec{
				{id: uapi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, kind: kConst, mandatory: true},
				{id: uapi.UVERBS_ATTR_QUERY_PORT_RESP, kind: kPtrOut, mandatory: true},
			}},
		key(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_GID_ENTRY): {
			handle: queryGIDEntry,
			attrs: []attrSpec{
				{id: uapi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, kind: kConst, mandatory: true},
				{id: uapi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, kind: kConst, mandatory: true},
				{id: uapi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, kind: kFlags, mandatory: true},
				{id: uapi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, kind: kPtrOut, mandatory: true,
					min: int(unsafe.Sizeof(uapi.IBUverbsGIDEntry{}))},
			}},
		key(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_GID_TABLE): {
			handle: queryGIDTable,
			attrs: []attrSpec{
				{id: uapi.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, kind: kConst, mandatory: true},
				{id: uapi.UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, kind: kFlags},
				{id: uapi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, kind: kPtrOut, mandatory: true},
				{id: uapi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, kind: kPtrOut, mandatory: true, min: 8},
			}},
		key(uapi.UVERBS_OBJECT_ASYNC_EVENT, uapi.UVERBS_METHOD_ASYNC_EVENT_ALLOC): {
			handle: asyncEventAlloc,
			attrs:  []attrSpec{{id: uapi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, kind: kFDNew, mandatory: true}},
		},
		key(uapi.UVERBS_OBJECT_PD, uapi.UVERBS_METHOD_PD_DESTROY): {
			handle: func(a *args) unix.Errno { return a.c.deallocPD(uint32(a.val(0))) },
			attrs:  []attrSpec{{id: uapi.UVERBS_ATTR_DESTROY_PD_HANDLE, kind: kIDR, mandatory: true}},
		},
		key(uapi.UVERBS_OBJECT_MR, uapi.UVERBS_METHOD_MR_DESTROY): {
			handle: func(a *args) unix.Errno { return a.c.deregMR(uint32(a.val(0))) },
			attrs:  []attrSpec{{id: uapi.UVERBS_ATTR_DESTROY_MR_HANDLE, kind: kIDR, mandatory: true}},
		},
		key(uapi.UVERBS_OBJECT_MW, uapi.UVERBS_METHOD_MW_DESTROY): {
			handle: func(a *args) unix.Errno { return a.c.deallocMW(uint32(a.val(0))) },
			attrs:  []attrSpec{{id: uapi.UVERBS_ATTR_DESTROY_MW_HANDLE, kind: kIDR, mandatory: true}},
		},
		key(uapi.UVERBS_OBJECT_AH, uapi.UVERBS_METHOD_AH_DESTROY): {
			handle: func(a *args) unix.Errno { return a.c.destroyAH(uint32(a.val(0))) },
			attrs:  []attrSpec{{id: uapi.UVERBS_ATTR_DESTROY_AH_HANDLE, kind: kIDR, mandatory: true}},
		},
		key(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_CREATE): {
			udata: true, handle: cqCreateIoctl,
			attrs: []attrSpec{
				{id: uapi.UVERBS_ATTR_CREATE_CQ_HANDLE, kind: kIDRNew, mandatory: true},
				{id: uapi.UVERBS_ATTR_CREATE_CQ_CQE, kind: kPtrIn, mandatory: true, min: 4, max: 4},
				{id: uapi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, kind: kPtrIn, mandatory: true, min: 8, max: 8},
				{id: uapi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, kind: kFD},
				{id: uapi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, kind: kPtrIn, mandatory: true, min: 4, max: 4},
				{id: uapi.UVERBS_ATTR_CREATE_CQ_FLAGS, kind: kFlags},
				{id: uapi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, kind: kPtrOut, mandatory: true, min: 4},
				{id: uapi.UVERBS_ATTR_CREATE_CQ_EVENT_FD, kind: kFD},
			}},
		key(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY): {
			handle: cqDestroyIoctl,
			attrs: []attrSpec{
				{id: uapi.UVERBS_ATTR_DESTROY_CQ_HANDLE, kind: kIDR, mandatory: true},
				{id: uapi.UVERBS_ATTR_DESTROY_CQ_RESP, kind: kPtrOut, mandatory: true,
					min: int(unsafe.Sizeof(uapi.IBUverbsDestroyCQResp{}))},
			}},
		key(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_CREATE): {
			udata: true, handle: qpCreateIoctl,
			attrs: []attrSpec{
				{id: uapi.UVERBS_ATTR_CREATE_QP_HANDLE, kind: kIDRNew, mandatory: true},
				{id: uapi.UVERBS_ATTR_CREATE_QP_XRCD_HANDLE, kind: kIDR},
				{id: uapi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, kind: kIDR},
				{id: uapi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, kind: kIDR},
				{id: uapi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, kind: kIDR},
				{id: uapi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, kind: kIDR},
				{id: uapi.UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE, kind: kIDR},
				{id: uapi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, kind: kPtrIn, mandatory: true, min: 8, max: 8},
				{id: uapi.UVERBS_ATTR_CREATE_QP_CAP, kind: kPtrIn, mandatory: true,
					min: int(unsafe.Sizeof(uapi.IBUverbsQPCap{})), max: int(unsafe.Sizeof(uapi.IBUverbsQPCap{}))},
				{id: uapi.UVERBS_ATTR_CREATE_QP_TYPE, kind: kConst, mandatory: true},
				{id: uapi.UVERBS_ATTR_CREATE_QP_FLAGS, kind: kFlags},
				{id: uapi.UVERBS_ATTR_CREATE_QP_SOURCE_QPN, kind: kPtrIn, min: 4, max: 4},
				{id: uapi.UVERBS_ATTR_CREATE_QP_EVENT_FD, kind: kFD},
				{id: uapi.UVERBS_ATTR_CREATE_QP_RESP_CAP, kind: kPtrOut, mandatory: true,
					min: int(unsafe.Sizeof(uapi.IBUverbsQPCap{}))},
				{id: uapi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, kind: kPtrOut, mandatory: true, min: 4},
			}},
		key(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE): {
			udata: true, handle: srqCreateIoctl,
			attrs: []attrSpec{
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_HANDLE, kind: kIDRNew, mandatory: true},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, kind: kIDR, mandatory: true},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_TYPE, kind: kConst, mandatory: true},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE, kind: kIDR},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE, kind: kIDR},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, kind: kPtrIn, mandatory: true, min: 8, max: 8},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_MAX_WR, kind: kPtrIn, mandatory: true, min: 4, max: 4},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, kind: kPtrIn, mandatory: true, min: 4, max: 4},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_LIMIT, kind: kPtrIn, mandatory: true, min: 4, max: 4},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS, kind: kPtrIn, min: 4, max: 4},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_EVENT_FD, kind: kFD},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, kind: kPtrOut, mandatory: true, min: 4},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, kind: kPtrOut, mandatory: true, min: 4},
				{id: uapi.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, kind: kPtrOut, min: 4},
			}},
		key(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_DESTROY): {
			handle: srqDestroyIoctl,
			attrs: []attrSpec{
				{id: uapi.UVERBS_ATTR_DESTROY_SRQ_HANDLE, kind: kIDR, mandatory: true},
				{id: uapi.UVERBS_ATTR_DESTROY_SRQ_RESP, kind: kPtrOut, mandatory: true,
					min: int(unsafe.Sizeof(uapi.IBUverbsDestroySRQResp{}))},
			}},
		key(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY): {
			handle: qpDestroyIoctl,
			attrs: []attrSpec{
				{id: uapi.UVERBS_ATTR_DESTROY_QP_HANDLE, kind: kIDR, mandatory: true},
				{id: uapi.UVERBS_ATTR_DESTROY_QP_RESP, kind: kPtrOut, mandatory: true, min: 4},
			}},
	}
	methodTableStatic = t
	methodTable = make(map[uint32]*method, len(t)+2)
	for k, v := range t {
		methodTable[k] = v
	}
	methodTable[key(uapi.MLX5_IB_OBJECT_UAR, uapi.MLX5_IB_METHOD_UAR_OBJ_ALLOC)] = &method{
		handle: uarAlloc,
		attrs: []attrSpec{
			{id: uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, kind: kIDRNew, mandatory: true},
			{id: uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, kind: kConst, mandatory: true},
			{id: uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, kind: kPtrOut, mandatory: true, min: 8},
			{id: uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, kind: kPtrOut, mandatory: true, min: 4},
			{id: uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, kind: kPtrOut, mandatory: true, min: 4},
		}}
	methodTable[key(uapi.MLX5_IB_OBJECT_UAR, uapi.MLX5_IB_METHOD_UAR_OBJ_DESTROY)] = &method{
		handle: uarDestroy,
		attrs:  []attrSpec{{id: uapi.MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, kind: kIDR, mandatory: true}},
	}
}

// ---- Context and device queries ----

func getContext(a *args) unix.Errno {
	c := a.c
	if c.ucontext {
		return unix.EINVAL
	}
	in, ok := a.in(uapi.UVERBS_ATTR_UHW_IN)
	if !ok {
		return unix.EFAULT
	}
	resp, e := c.allocUcontext(in, a.outLen(uapi.UVERBS_ATTR_UHW_OUT))
	if e != 0 {
		return e
	}
	a.out(uapi.UVERBS_ATTR_UHW_OUT, structBytes(resp))
	a.out(uapi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, u32b(uint32(c.d.opts.CompVectors)))
	a.out(uapi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, u64b(uapi.IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS))
	return 0
}

// allocUcontext is mlx5_ib_alloc_ucontext: the driver's half of
// GET_CONTEXT.
func (c *Context) allocUcontext(in []byte, outLen int) (*uapi.Mlx5IBAllocUcontextResp, unix.Errno) {
	const (
		sizeV0  = int(unsafe.Sizeof(uapi.Mlx5IBAllocUcontextReq{}))
		minV2   = int(unsafe.Offsetof(uapi.Mlx5IBAllocUcontextReqV2{}.MaxCQEVersion)) + 1
		sizeV2  = int(unsafe.Sizeof(uapi.Mlx5IBAllocUcontextReqV2{}))
		minResp = int(unsafe.Offsetof(uapi.Mlx5IBAllocUcontextResp{}.MaxRecvWR)) + 4
	)
	var req uapi.Mlx5IBAllocUcontextReqV2
	switch {
	case len(in) == sizeV0:
	case len(in) >= minV2:
	default:
		return nil, unix.EINVAL
	}
	copy(structBytes(&req), in)
	for _, b := range in[min(len(in), sizeV2):] {
		if b != 0 {
			return nil, unix.EOPNOTSUPP
		}
	}
	if req.Flags&^uapi.MLX5_IB_ALLOC_UCTX_DEVX != 0 {
		return nil, unix.EOPNOTSUPP
	}
	if req.Flags&uapi.MLX5_IB_ALLOC_UCTX_DEVX != 0 {
		return nil, unix.EPERM // the model has no DEVX
	}
	if req.CompMask != 0 || req.Reserved0 != 0 || req.Reserved1 != 0 || req.Reserved2 != 0 {
		return nil, unix.EOPNOTSUPP
	}
	if outLen < minResp {
		return nil, unix.EINVAL
	}
	d := c.d
	dyn := req.LibCaps&uapi.MLX5_LIB_CAP_DYN_UAR != 0
	if dyn && d.opts.StaticUAR {
		if d.opts.RefuseDynUAR {
			return nil, unix.EINVAL
		}
		dyn = false // an old kernel does not know the bit
	}
	if !dyn {
		total := (req.TotalNumBfregs + bfRegsPerUAR - 1) &^ (bfRegsPerUAR - 1)
		if req.NumLowLatencyBfregs > total-1 {
			return nil, unix.EINVAL
		}
		if total > maxBfregs {
			return nil, unix.ENOMEM
		}
		for i := uint32(0); i < total/bfRegsPerUAR; i++ {
			u, err := c.mapUAR(int64(i), true)
			if err != nil {
				for _, u := range c.static {
					c.freeUAR(u)
				}
				c.static = nil
				return nil, unix.ENOMEM
			}
			c.static = append(c.static, u)
		}
		c.bfregs, c.lowLat = total, req.NumLowLatencyBfregs
	}
	c.dynUAR = dyn
	c.cqeVersion = min(req.MaxCQEVersion, 1)
	if d.opts.CQEVersion0 {
		c.cqeVersion = 0
	}
	c.ucontext = true
	r := &uapi.Mlx5IBAllocUcontextResp{
		QPTabSize:       1 << 18,
		BFRegSize:       bfRegSize,
		CacheLineSize:   64,
		MaxSqDescSz:     512,
		MaxRqDescSz:     maxRqDesc,
		MaxSendWqebb:    maxQPWR,
		MaxRecvWR:       maxQPWR,
		MaxSRQRecvWR:    maxQPWR,
		NumPorts:        1,
		CompMask:        uapi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY,
		CQEVersion:      c.cqeVersion,
		CmdsSuppUhw:     uapi.MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE | uapi.MLX5_USER_CMDS_SUPP_UHW_CREATE_AH,
		EthMinInline:    uapi.MLX5_USER_INLINE_MODE_NONE + 1,
		LogUARSize:      12,
		NumUarsPerPage:  1,
		DumpFillMkey:    0x100,
		ResponseLength:  uint32(min(outLen, int(unsafe.Sizeof(uapi.Mlx5IBAllocUcontextResp{})))),
		TotBfregs:       c.bfregs,
		NumDynBfregs:    0,
		FlowActionFlags: 0,
	}
	if d.opts.RealTimeClock {
		r.CompMask |= uapi.MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_REAL_TIME_TS
	}
	return r, 0
}

// mapUAR maps a UAR page of the context's fd into the model: a static
// page i (the kernel exposes it at several mmap commands: regular/WC 0,
// WC 2, NC 3, all the same page on a device, different pages of the
// memfd here, so all are watched), or a dynamic one.
func (c *Context) mapUAR(index int64, static bool) (*uar, error) {
	d := c.d
	u := &uar{ctx: c, pageID: d.nextUAR, static: static, index: uint32(index)}
	d.nextUAR++
	var offs []int64
	if static {
		for _, cmd := range []int64{uapi.MLX5_IB_MMAP_REGULAR_PAGE, uapi.MLX5_IB_MMAP_WC_PAGE, uapi.MLX5_IB_MMAP_NC_PAGE} {
			offs = append(offs, (cmd<<8|index)*uarPageSize)
		}
	} else {
		offs = []int64{(dynUARFirstPage + index) * uarPageSize}
	}
	for _, off := range offs {
		m, err := unix.Mmap(c.fd, off, uarPageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			u.unmap()
			return nil, err
		}
		u.maps = append(u.maps, m)
	}
	u.offset = offs[0]
	c.uars = append(c.uars, u)
	return u, nil
}

func (c *Context) freeUAR(u *uar) {
	for i, x := range c.uars {
		if x == u {
			c.uars = append(c.uars[:i], c.uars[i+1:]...)
			break
		}
	}
	u.unmap()
}

// uar is a UAR page: its doorbell registers, as the model maps them.
type uar struct {
	ctx    *Context
	handle uint32
	typ    uint32 // dynamic: MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF or _NC
	static bool
	index  uint32 // static page index, or dynamic slot
	pageID uint32 // the device's UAR index
	offset int64  // mmap offset (the first, for static pages)
	maps   [][]byte
}

func (u *uar) unmap() {
	for _, m := range u.maps {
		unix.Munmap(m)
	}
	u.maps = nil
}

func uarAlloc(a *args) unix.Errno {
	c := a.c
	if !c.dynUAR {
		return unix.EINVAL
	}
	typ := uint32(a.val(uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE))
	if typ != uapi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF && typ != uapi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC {
		return unix.EOPNOTSUPP
	}
	if c.nextDynUAR >= maxDynUARs {
		return unix.ENOMEM
	}
	u, err := c.mapUAR(int64(c.nextDynUAR), false)
	if err != nil {
		return unix.ENOMEM
	}
	c.nextDynUAR++
	u.typ = typ
	u.handle = c.newHandle(u)
	a.setNew(uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE, uint64(u.handle))
	a.out(uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, u64b(uint64(u.offset)))
	a.out(uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, u32b(uarPageSize))
	a.out(uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, u32b(u.pageID))
	return 0
}

func uarDestroy(a *args) unix.Errno {
	c := a.c
	h := uint32(a.val(uapi.MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE))
	u, ok := c.handles[h].(*uar)
	if !ok {
		return unix.EINVAL
	}
	delete(c.handles, h)
	c.freeUAR(u)
	return 0
}

func (c *Context) uarByPageID(id uint32) *uar {
	for _, u := range c.uars {
		if u.pageID == id {
			return u
		}
	}
	return nil
}

func portAttr() uapi.IBUverbsQueryPortRespEx {
	return uapi.IBUverbsQueryPortRespEx{LegacyResp: uapi.IBUverbsQueryPortResp{
		PortCapFlags: uapi.IB_UVERBS_PCF_CM_SUP | uapi.IB_UVERBS_PCF_IP_BASED_GIDS,
		MaxMsgSz:     portMaxMsg,
		GIDTblLen:    gidTableLen,
		PkeyTblLen:   pkeyTableLen,
		State:        4, // ACTIVE
		MaxMTU:       mtu4096,
		ActiveMTU:    mtu1024,
		MaxVlNum:     4,
		ActiveWidth:  2,  // 4X
		ActiveSpeed:  32, // EDR-like
		PhysState:    5,  // LinkUp
		LinkLayer:    2,  // IBV_LINK_LAYER_ETHERNET
	}}
}

func queryPortIoctl(a *args) unix.Errno {
	if a.val(uapi.UVERBS_ATTR_QUERY_PORT_PORT_NUM) != 1 {
		return unix.EINVAL
	}
	r := portAttr()
	a.out(uapi.UVERBS_ATTR_QUERY_PORT_RESP, structBytes(&r))
	return 0
}

func gidEntry(i int) uapi.IBUverbsGIDEntry {
	e := uapi.IBUverbsGIDEntry{GIDIndex: uint32(i), PortNum: 1, GIDType: uapi.IB_UVERBS_GID_TYPE_ROCE_V2}
	copy(structBytes(&e)[:16], gids[i][:]) // __aligned_u64 gid[2]: the 16 bytes in network order
	return e
}

func queryGIDEntry(a *args) unix.Errno {
	if a.val(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS) != 0 {
		return unix.EINVAL
	}
	port, idx := a.val(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT), a.val(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX)
	if port != 1 || idx >= gidTableLen {
		return unix.EINVAL
	}
	if idx >= uint64(len(gids)) {
		return unix.ENODATA
	}
	e := gidEntry(int(idx))
	a.out(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, structBytes(&e))
	return 0
}

func queryGIDTable(a *args) unix.Errno {
	if a.val(uapi.UVERBS_ATTR_QUERY_GID_TABLE_FLAGS) != 0 {
		return unix.EINVAL
	}
	size := int(a.val(uapi.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE))
	if size < int(unsafe.Sizeof(uapi.IBUverbsGIDEntry{})) {
		return unix.EINVAL
	}
	room := a.outLen(uapi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES) / size
	if room < len(gids) {
		return unix.EINVAL
	}
	buf := make([]byte, len(gids)*size)
	for i := range gids {
		e := gidEntry(i)
		copy(buf[i*size:], structBytes(&e))
	}
	a.out(uapi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, buf)
	a.out(uapi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, u64b(uint64(len(gids))))
	return 0
}

func deviceAttr() uapi.IBUverbsQueryDeviceResp {
	return uapi.IBUverbsQueryDeviceResp{
		FwVer:           fwVer,
		NodeGuid:        binary.NativeEndian.Uint64(nodeGUID[:]),
		SysImageGuid:    binary.NativeEndian.Uint64(nodeGUID[:]),
		MaxMRSize:       ^uint64(0),
		PageSizeCap:     ^uint64(0xfff),
		VendorID:        vendorID,
		VendorPartID:    vendorPartID,
		MaxQP:           maxQP,
		MaxQPWR:         maxQPWR,
		DeviceCapFlags:  0x21361c36, // what mlx5 reports, roughly: RC RNR NAK gen, port active event, …
		MaxSGE:          maxSGE,
		MaxSGERd:        maxSGE,
		MaxCQ:           1 << 24,
		MaxCQE:          maxCQE,
		MaxMR:           1 << 24,
		MaxPD:           1 << 24,
		MaxQPRdAtom:     maxRdAtom,
		MaxResRdAtom:    maxRdAtom * maxQP,
		MaxQPInitRdAtom: maxRdAtom,
		AtomicCap:       1, // IBV_ATOMIC_HCA
		MaxMW:           1 << 24,
		MaxAH:           1 << 24 / 2,
		MaxSRQ:          1 << 23,
		MaxSRQWR:        maxQPWR - 1,
		MaxSRQSGE:       31,
		MaxPkeys:        pkeyTableLen,
		LocalCaAckDelay: 16,
		PhysPortCnt:     1,
	}
}

func asyncEventAlloc(a *args) unix.Errno {
	c := a.c
	p, err := newEventPipe(int(unsafe.Sizeof(uapi.IBUverbsAsyncEventDesc{})))
	if err != nil {
		return unix.EMFILE
	}
	if c.async == nil {
		c.async = p // the first becomes the context's default
	}
	a.setNew(uapi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, uint64(p.r))
	return 0
}

// asyncEvent writes an async event to the context's async fd.
func (c *Context) asyncEvent(element uint64, typ uint32, k eventKey) bool {
	if c.async == nil {
		return false
	}
	ev := uapi.IBUverbsAsyncEventDesc{Element: element, EventType: typ}
	return c.async.post(structBytes(&ev), k)
}

// ---- Simple objects: PD, MR, AH ----

type pd struct {
	handle uint32
	refs   int // MRs, QPs, AHs
}

type mr struct {
	handle       uint32
	pd           *pd
	key          uint32 // lkey = rkey
	iova, length uint64
	base         unsafe.Pointer // the memory at iova
	access       uint32
	win          *window // a memory window's mkey (mw_linux.go); nil for an MR
}

type ah struct {
	handle uint32
	pd     *pd
	attr   uapi.IBUverbsAHAttr
	dmac   [6]byte
}

func (c *Context) pdByHandle(h uint32) *pd { p, _ := c.handles[h].(*pd); return p }

func (c *Context) deallocPD(h uint32) unix.Errno {
	p := c.pdByHandle(h)
	if p == nil {
		return unix.EINVAL
	}
	if p.refs > 0 {
		return unix.EBUSY
	}
	delete(c.handles, h)
	return 0
}

func (c *Context) deregMR(h uint32) unix.Errno {
	m, ok := c.handles[h].(*mr)
	if !ok || m.win != nil {
		return unix.EINVAL
	}
	delete(c.handles, h)
	delete(c.d.mrs, m.key)
	m.pd.refs--
	return 0
}

func (c *Context) destroyAH(h uint32) unix.Errno {
	x, ok := c.handles[h].(*ah)
	if !ok {
		return unix.EINVAL
	}
	delete(c.handles, h)
	x.pd.refs--
	return 0
}

// regMR is ib_uverbs_reg_mr and mlx5_ib_reg_user_mr.
func (c *Context) regMR(r *uapi.IBUverbsRegMR) (*mr, unix.Errno) {
	const known = uapi.IB_UVERBS_ACCESS_LOCAL_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_READ |
		uapi.IB_UVERBS_ACCESS_REMOTE_ATOMIC | uapi.IB_UVERBS_ACCESS_MW_BIND | uapi.IB_UVERBS_ACCESS_ZERO_BASED |
		uapi.IB_UVERBS_ACCESS_OPTIONAL_RANGE
	p := c.pdByHandle(r.PDHandle)
	if p == nil {
		return nil, unix.EINVAL
	}
	acc := r.AccessFlags
	if acc&^known != 0 {
		return nil, unix.EINVAL
	}
	// ib_check_mr_access: remote write or atomic needs local write.
	if acc&(uapi.IB_UVERBS_ACCESS_REMOTE_WRITE|uapi.IB_UVERBS_ACCESS_REMOTE_ATOMIC) != 0 && acc&uapi.IB_UVERBS_ACCESS_LOCAL_WRITE == 0 {
		return nil, unix.EINVAL
	}
	base := ptrOf(&r.Start)
	if r.Length == 0 || base == nil {
		return nil, unix.EINVAL
	}
	if (r.Start != uapi.Pointer{}) && !mapped(base, r.Length) {
		return nil, unix.EFAULT // get_user_pages fails
	}
	if (r.HcaVa&0xfff) != (uint64(uintptr(base))&0xfff) && acc&uapi.IB_UVERBS_ACCESS_ZERO_BASED == 0 {
		return nil, unix.EINVAL // ib_umem: iova and address must share the page offset
	}
	d := c.d
	k := d.nextKey<<8 | uint32(d.nextKey&0x7f)
	d.nextKey++
	m := &mr{pd: p, key: k, iova: r.HcaVa, length: r.Length, base: base, access: acc}
	if acc&uapi.IB_UVERBS_ACCESS_ZERO_BASED != 0 {
		m.iova = 0
	}
	m.handle = c.newHandle(m)
	d.mrs[k] = m
	p.refs++
	return m, 0
}

// mapped reports whether every page of n bytes at p is mapped, as pinning
// them would.
func mapped(p unsafe.Pointer, n uint64) bool {
	page := uintptr(uarPageSize)
	start := uintptr(p) &^ (page - 1)
	end := (uintptr(p) + uintptr(n) + page - 1) &^ (page - 1)
	if end <= start {
		return false
	}
	vec := make([]byte, (end-start)/page)
	// mincore takes any address; ENOMEM says a page is not mapped.
	_, _, e := unix.Syscall(unix.SYS_MINCORE, start, end-start, uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	return e == 0
}

// createAH is ib_uverbs_create_ah and mlx5_ib_create_ah: RoCE needs a
// GRH with a valid source GID; the kernel resolves the destination MAC.
func (c *Context) createAH(pdh uint32, attr *uapi.IBUverbsAHAttr, uhwOutLen int) (*ah, []byte, unix.Errno) {
	p := c.pdByHandle(pdh)
	if p == nil {
		return nil, nil, unix.EINVAL
	}
	if attr.PortNum != 1 || attr.IsGlobal == 0 || int(attr.Grh.SgidIndex) >= len(gids) {
		return nil, nil, unix.EINVAL
	}
	dmac, ok := resolveMAC(attr.Grh.Dgid)
	if !ok {
		return nil, nil, unix.EHOSTUNREACH
	}
	x := &ah{pd: p, attr: *attr, dmac: dmac}
	var out []byte
	if uhwOutLen > 0 {
		const minResp = int(unsafe.Offsetof(uapi.Mlx5IBCreateAHResp{}.Dmac)) + 6
		if uhwOutLen < minResp {
			return nil, nil, unix.EINVAL
		}
		r := uapi.Mlx5IBCreateAHResp{ResponseLength: uint32(minResp), Dmac: dmac}
		out = structBytes(&r)
	}
	x.handle = c.newHandle(x)
	p.refs++
	return x, out, 0
}

// resolveMAC finds the Ethernet address of a destination GID: the port's
// own for its GIDs (the wire is a loopback), the EUI-64 one for a
// link-local GID.
func resolveMAC(g [16]byte) ([6]byte, bool) {
	if gidIndex(g) >= 0 {
		return portMAC, true
	}
	if g[0] == 0xfe && g[1] == 0x80 && g[11] == 0xff && g[12] == 0xfe {
		return [6]byte{g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]}, true
	}
	return [6]byte{}, false
}
