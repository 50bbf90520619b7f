package transport

import (
	"structs"
	"unsafe"
)

// Names from <rdma/rdma_user_ioctl_cmds.h> and <rdma/ib_user_ioctl_cmds.h>.
// TODO(uapi): take these from the generated uapi package.
const (
	RDMA_VERBS_IOCTL = 0xc0181b01 // _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr)

	UVERBS_OBJECT_DEVICE      = 0
	UVERBS_METHOD_GET_CONTEXT = 3

	UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS = 0
	UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT     = 1

	UVERBS_ATTR_F_MANDATORY    = 1 << 0
	UVERBS_ATTR_F_VALID_OUTPUT = 1 << 1

	RDMA_DRIVER_MLX5 = 1
	RDMA_DRIVER_RXE  = 14
)

// Hdr mirrors struct ib_uverbs_ioctl_hdr (24 bytes).
type Hdr struct {
	_         structs.HostLayout
	Length    uint16
	ObjectID  uint16
	MethodID  uint16
	NumAttrs  uint16
	Reserved1 uint64
	DriverID  uint32
	Reserved2 uint32
}

// Attr mirrors struct ib_uverbs_attr (16 bytes).
type Attr struct {
	_        structs.HostLayout
	AttrID   uint16
	Len      uint16
	Flags    uint16
	AttrData uint16
	Data     uint64
}

var (
	_ [24]byte = [unsafe.Sizeof(Hdr{})]byte{}
	_ [16]byte = [unsafe.Sizeof(Attr{})]byte{}
)
