package kverbs

import (
	"encoding/binary"

	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// UAR is a user access region the mlx5 driver allocated: a page of
// doorbell registers to mmap from the uverbs fd.
type UAR struct {
	Handle     uint32
	MmapOffset uint64 // a byte offset for mmap
	MmapLength uint32
	PageID     uint32 // what CQ and QP creation name it by
}

// AllocUAR allocates a dynamic UAR (mlx5 driver object UAR, kernel ≥ 5.8
// with MLX5_LIB_CAP_DYN_UAR): typ is MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF or _NC.
func AllocUAR(c *transport.Conn, typ uint32) (UAR, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	cmd.Reset(uapi.MLX5_IB_OBJECT_UAR, uapi.MLX5_IB_METHOD_UAR_OBJ_ALLOC)
	s := cmd.IDRNew(uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE)
	cmd.Const(uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE, uint64(typ))
	off := cmd.Out(uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, 8, true)
	length := cmd.Out(uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, 4, true)
	page := cmd.Out(uapi.MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID, 4, true)
	if err := c.Invoke(cmd); err != nil {
		return UAR{}, err
	}
	ne := binary.NativeEndian
	u := UAR{Handle: cmd.NewHandle(s)}
	if b := cmd.Output(off); b != nil {
		u.MmapOffset = ne.Uint64(b)
	}
	if b := cmd.Output(length); b != nil {
		u.MmapLength = ne.Uint32(b)
	}
	if b := cmd.Output(page); b != nil {
		u.PageID = ne.Uint32(b)
	}
	return u, nil
}

// DestroyUAR frees a dynamic UAR.
func DestroyUAR(c *transport.Conn, handle uint32) error {
	cmd := getCmd()
	defer putCmd(cmd)
	cmd.Reset(uapi.MLX5_IB_OBJECT_UAR, uapi.MLX5_IB_METHOD_UAR_OBJ_DESTROY)
	cmd.IDR(uapi.MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE, handle)
	return c.Invoke(cmd)
}
