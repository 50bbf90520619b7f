package kverbs

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// QueryDevice returns the device's attributes: the extended write command
// EX_QUERY_DEVICE with comp_mask 0, as ibv_query_device_ex sends it
// (rdma-core's ibv_cmd_query_device_any). The kernel fills as much of the
// response as both sides know and says how much in ResponseLength; bytes
// past it are zeroed here, whatever the kernel left there. A kernel or
// driver without the extended command (EOPNOTSUPP, ENOSYS) gets the plain
// QUERY_DEVICE, and ResponseLength is then the size of Base alone.
func QueryDevice(c *transport.Conn) (uapi.IBUverbsExQueryDeviceResp, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	cmd.ResetWrite(uapi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE, true,
		transport.SizeOf[uapi.IBUverbsExQueryDevice](), transport.SizeOf[uapi.IBUverbsExQueryDeviceResp]())
	// The request (comp_mask, reserved) stays zero: the kernel refuses
	// anything else with EINVAL.
	err := c.Invoke(cmd)
	if err == nil {
		return exQueryDeviceResp(cmd.CoreOut()), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return uapi.IBUverbsExQueryDeviceResp{}, err
	}
	cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_QUERY_DEVICE, false,
		transport.SizeOf[uapi.IBUverbsQueryDevice](), transport.SizeOf[uapi.IBUverbsQueryDeviceResp]())
	if err := c.Invoke(cmd); err != nil {
		return uapi.IBUverbsExQueryDeviceResp{}, err
	}
	var r uapi.IBUverbsExQueryDeviceResp
	r.Base = *transport.As[uapi.IBUverbsQueryDeviceResp](cmd.CoreOut())
	r.ResponseLength = uint32(unsafe.Sizeof(r.Base))
	return r, nil
}

// exQueryDeviceResp reads the response of EX_QUERY_DEVICE from out (the
// command's core response, 8-byte aligned, sizeof the struct), zeroing
// the bytes past its ResponseLength.
func exQueryDeviceResp(out []byte) uapi.IBUverbsExQueryDeviceResp {
	r := transport.As[uapi.IBUverbsExQueryDeviceResp](out)
	valid := uint64(r.ResponseLength) // not int: past 2^31 that wraps on 32-bit
	if least := uint64(unsafe.Offsetof(r.ResponseLength) + unsafe.Sizeof(r.ResponseLength)); valid < least {
		valid = least // the kernel always writes at least this much (UAPI_DEF_WRITE_IO_EX)
	}
	if valid < uint64(len(out)) {
		clear(out[valid:])
	}
	return *r
}

// QueryPort returns the attributes of port (ibv_query_port): the
// QUERY_PORT ioctl (kernel ≥ 5.0), or the legacy write QUERY_PORT where
// the kernel lacks the method, as rdma-core's ibv_cmd_query_port does. The
// write command answers only the legacy part: PortCapFlags2 and the rest
// stay zero. A port the device does not have gives EINVAL.
func QueryPort(c *transport.Conn, port uint8) (uapi.IBUverbsQueryPortRespEx, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	if ok, err := c.Supports(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_PORT); err != nil {
		return uapi.IBUverbsQueryPortRespEx{}, err
	} else if ok {
		cmd.Reset(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_PORT)
		cmd.Const(uapi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, uint64(port))
		o := cmd.Out(uapi.UVERBS_ATTR_QUERY_PORT_RESP, transport.SizeOf[uapi.IBUverbsQueryPortRespEx](), true)
		if err := c.Invoke(cmd); err != nil {
			return uapi.IBUverbsQueryPortRespEx{}, err
		}
		r, err := transport.OutputAs[uapi.IBUverbsQueryPortRespEx](cmd, o)
		if err != nil {
			return uapi.IBUverbsQueryPortRespEx{}, err
		}
		return *r, nil
	}
	req := transport.As[uapi.IBUverbsQueryPort](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_QUERY_PORT, false,
		transport.SizeOf[uapi.IBUverbsQueryPort](), transport.SizeOf[uapi.IBUverbsQueryPortResp]()))
	req.PortNum = port
	if err := c.Invoke(cmd); err != nil {
		return uapi.IBUverbsQueryPortRespEx{}, err
	}
	return uapi.IBUverbsQueryPortRespEx{LegacyResp: *transport.As[uapi.IBUverbsQueryPortResp](cmd.CoreOut())}, nil
}

// GIDEntry is struct ib_uverbs_gid_entry: one entry of a port's GID table.
type GIDEntry = uapi.IBUverbsGIDEntry

// QueryGIDEntry returns entry index of port's GID table: the ioctl
// UVERBS_METHOD_QUERY_GID_ENTRY (kernel ≥ 5.10; probe it with
// Conn.Supports first, older kernels answer EPROTONOSUPPORT). The kernel
// answers EINVAL for a port or index out of range and ENODATA for an
// index in range that holds no GID (ibv_query_gid_ex(3)).
func QueryGIDEntry(c *transport.Conn, port, index uint32) (GIDEntry, error) {
	cmd := getCmd()
	defer putCmd(cmd)
	cmd.Reset(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_GID_ENTRY)
	cmd.Const(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, uint64(port))
	cmd.Const(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, uint64(index))
	cmd.InU32(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0) // mandatory; no flags are defined
	o := cmd.Out(uapi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, transport.SizeOf[GIDEntry](), true)
	if err := c.Invoke(cmd); err != nil {
		return GIDEntry{}, err
	}
	r, err := transport.OutputAs[GIDEntry](cmd, o)
	if err != nil {
		return GIDEntry{}, err
	}
	return *r, nil
}

// MaxGIDTableEntries is the most entries QueryGIDTable asks for at once:
// what fits in one command's arena beside the count.
const MaxGIDTableEntries = (transport.ArenaSize - 8) / int(unsafe.Sizeof(GIDEntry{}))

// QueryGIDTable copies the valid GID entries of every port of the device
// into dst and returns how many it copied: the ioctl
// UVERBS_METHOD_QUERY_GID_TABLE (kernel ≥ 5.10; probe it with
// Conn.Supports first). It asks for at most min(len(dst),
// MaxGIDTableEntries) entries; the kernel answers EINVAL when the device
// has more valid entries than that (ibv_query_gid_table(3)), and the
// caller then reads the table entry by entry with QueryGIDEntry.
func QueryGIDTable(c *transport.Conn, dst []GIDEntry) (int, error) {
	n := min(len(dst), MaxGIDTableEntries)
	if n == 0 {
		return 0, unix.EINVAL
	}
	size := int(unsafe.Sizeof(GIDEntry{}))
	cmd := getCmd()
	defer putCmd(cmd)
	cmd.Reset(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_GID_TABLE)
	cmd.Const(uapi.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, uint64(size))
	cmd.InU32(uapi.UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 0)
	ents := cmd.Out(uapi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, n*size, true)
	num := cmd.Out(uapi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, 8, true)
	if err := c.Invoke(cmd); err != nil {
		return 0, err
	}
	return gidTable(dst[:n], cmd.Output(num), cmd.Output(ents))
}

// gidTable reads QUERY_GID_TABLE's answer, the count nb (nil if the
// kernel wrote none) and the entries b (nil likewise), into dst, which is
// as long as the entries asked for.
func gidTable(dst []GIDEntry, nb, b []byte) (int, error) {
	if len(nb) < 8 {
		return 0, unix.EIO
	}
	got := ne.Uint64(nb)
	if got == 0 {
		return 0, nil
	}
	size := int(unsafe.Sizeof(GIDEntry{}))
	if b == nil || got > uint64(len(dst)) || got > uint64(len(b)/size) {
		return 0, unix.EIO // the kernel wrote more than it was given room for: never trust it
	}
	for i := range int(got) {
		dst[i] = *transport.As[GIDEntry](b[i*size:])
	}
	return int(got), nil
}
