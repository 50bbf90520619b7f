package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/uapi"
)

// gidTableMax is how many entries one QUERY_GID_TABLE asks for; tests
// lower it to reach the entry-by-entry path.
var gidTableMax = kverbs.MaxGIDTableEntries

// QueryGID returns entry index of port's GID table (ibv_query_gid_ex).
// An index beyond the table gives an error wrapping EINVAL; an index in
// the table that holds no GID, one wrapping ENODATA.
//
// It uses the ioctl UVERBS_METHOD_QUERY_GID_ENTRY (kernel ≥ 5.10), and on
// older kernels reads sysfs (/sys/class/infiniband/<dev>/ports/<port>/
// gids/<index> and gid_attrs/), as libibverbs does.
func (c *Context) QueryGID(port, index int) (GIDEntry, error) {
	const op = "query gid"
	if err := checkPort(port); err != nil {
		return GIDEntry{}, c.opErr(op, err)
	}
	if index < 0 || index > math.MaxInt32 {
		return GIDEntry{}, c.opErr(op, fmt.Errorf("port %d: GID index %d out of range: %w", port, index, unix.EINVAL))
	}
	if err := c.use(op); err != nil {
		return GIDEntry{}, err
	}
	defer c.done()
	ioctl, err := c.conn.Supports(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_GID_ENTRY)
	if err != nil {
		return GIDEntry{}, c.opErr(op, fmt.Errorf("probing QUERY_GID_ENTRY: %w", err))
	}
	ethernet := false
	if !ioctl {
		pa, err := c.queryPort(op, port)
		if err != nil {
			return GIDEntry{}, err
		}
		if index >= pa.GIDTblLen {
			return GIDEntry{}, c.opErr(op, fmt.Errorf("port %d: GID index %d beyond the table of %d: %w", port, index, pa.GIDTblLen, unix.EINVAL))
		}
		ethernet = pa.LinkLayer == LinkLayerEthernet
	}
	e, err := c.gidAt(port, index, ioctl, ethernet, nil)
	if err != nil {
		return GIDEntry{}, c.opErr(op, fmt.Errorf("port %d index %d: %w", port, index, err))
	}
	return e, nil
}

// GIDTable returns the valid entries of port's GID table, in index order
// (ibv_query_gid_table, for one port).
//
// It uses the ioctl UVERBS_METHOD_QUERY_GID_TABLE (kernel ≥ 5.10), or
// QUERY_GID_ENTRY on each index when the device has more valid GIDs than
// one command holds, and on older kernels reads sysfs.
func (c *Context) GIDTable(port int) ([]GIDEntry, error) {
	const op = "query gid"
	if err := checkPort(port); err != nil {
		return nil, c.opErr(op, err)
	}
	if err := c.use(op); err != nil {
		return nil, err
	}
	defer c.done()
	pa, err := c.queryPort(op, port) // checks the port; its table size bounds the scans
	if err != nil {
		return nil, err
	}
	names := netdevNamer{}
	table, err := c.conn.Supports(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_GID_TABLE)
	if err != nil {
		return nil, c.opErr(op, fmt.Errorf("probing QUERY_GID_TABLE: %w", err))
	}
	if table {
		buf := make([]kverbs.GIDEntry, gidTableMax)
		n, err := kverbs.QueryGIDTable(c.conn, buf)
		switch {
		case err == nil:
			var out []GIDEntry
			for i := range buf[:n] {
				if int(buf[i].PortNum) == port {
					out = append(out, gidEntry(&buf[i], names))
				}
			}
			return out, nil
		case !errors.Is(err, unix.EINVAL):
			return nil, c.opErr(op, fmt.Errorf("port %d: %w", port, err))
		}
		// EINVAL: more valid GIDs than fit; read them one by one.
	}
	entry, err := c.conn.Supports(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_GID_ENTRY)
	if err != nil {
		return nil, c.opErr(op, fmt.Errorf("probing QUERY_GID_ENTRY: %w", err))
	}
	var out []GIDEntry
	for i := range pa.GIDTblLen {
		e, err := c.gidAt(port, i, entry, pa.LinkLayer == LinkLayerEthernet, names)
		if errors.Is(err, unix.ENODATA) {
			continue
		}
		if err != nil {
			return nil, c.opErr(op, fmt.Errorf("port %d index %d: %w", port, i, err))
		}
		out = append(out, e)
	}
	return out, nil
}

// gidAt reads entry index of port's GID table through QUERY_GID_ENTRY
// (ioctl) or sysfs; an entry that holds no GID is an error wrapping
// ENODATA.
func (c *Context) gidAt(port, index int, ioctl, ethernet bool, names netdevNamer) (GIDEntry, error) {
	if ioctl {
		k, err := kverbs.QueryGIDEntry(c.conn, uint32(port), uint32(index))
		if err != nil {
			return GIDEntry{}, err
		}
		return gidEntry(&k, names), nil
	}
	e, err := c.sysfsGID(port, index, ethernet)
	if err == nil && e.GID.IsZero() {
		err = unix.ENODATA
	}
	return e, err
}

// gidEntry converts the kernel's entry.
func gidEntry(k *kverbs.GIDEntry, names netdevNamer) GIDEntry {
	e := GIDEntry{
		Index:   int(k.GIDIndex),
		Port:    int(k.PortNum),
		Type:    GIDType(k.GIDType),
		Ifindex: int(k.NetdevIfindex),
	}
	// The __aligned_u64 gid[2] holds the 16 bytes in network order.
	for i, w := range k.GID {
		var b [8]byte
		binary.NativeEndian.PutUint64(b[:], w)
		copy(e.GID[8*i:], b[:])
	}
	e.Netdev = names.name(e.Ifindex)
	return e
}

// netdevNamer names network devices by ifindex, asking the kernel once
// per ifindex; a nil one asks every time.
type netdevNamer map[int]string

func (m netdevNamer) name(ifindex int) string {
	if ifindex <= 0 {
		return ""
	}
	if name, ok := m[ifindex]; ok {
		return name
	}
	var name string // "" if the netdev has gone since
	if ifi, err := net.InterfaceByIndex(ifindex); err == nil {
		name = ifi.Name
	}
	if m != nil {
		m[ifindex] = name
	}
	return name
}

// sysfsGID reads entry index of port's GID table from sysfs, as
// libibverbs does on kernels before 5.10: a zero GID is an empty entry.
// ethernet says how to read the type "IB/RoCE v1".
func (c *Context) sysfsGID(port, index int, ethernet bool) (GIDEntry, error) {
	dir := filepath.Join(sysIB, c.dev.Name, "ports", strconv.Itoa(port))
	i := strconv.Itoa(index)
	e := GIDEntry{Index: index, Port: port}
	s, err := readString(filepath.Join(dir, "gids", i))
	if err != nil {
		return e, err
	}
	if e.GID, err = ParseGID(s); err != nil {
		return e, fmt.Errorf("%s/gids/%s: %w", dir, i, err)
	}
	if e.GID.IsZero() {
		return e, nil
	}
	switch t, err := readString(filepath.Join(dir, "gid_attrs", "types", i)); {
	case err == nil:
		if e.Type, err = parseSysfsGIDType(t, ethernet); err != nil {
			return e, fmt.Errorf("%s/gid_attrs/types/%s: %w", dir, i, err)
		}
	case errors.Is(err, unix.EINVAL), errors.Is(err, fs.ErrNotExist):
		// InfiniBand ports fail the read with EINVAL; kernels before
		// gid_attrs (4.5) lack the file. Both are IB/RoCE v1.
		e.Type, _ = parseSysfsGIDType("IB/RoCE v1", ethernet)
	default:
		return e, err
	}
	if name, err := readString(filepath.Join(dir, "gid_attrs", "ndevs", i)); err == nil && name != "" {
		e.Netdev = name
		if ifi, err := net.InterfaceByName(name); err == nil {
			e.Ifindex = ifi.Index
		}
	}
	return e, nil
}
