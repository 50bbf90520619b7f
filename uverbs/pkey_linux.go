package uverbs

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// QueryPKey returns entry index of port's P_Key table (ibv_query_pkey).
// No command reads it: it comes from sysfs
// (/sys/class/infiniband/<dev>/ports/<port>/pkeys/<index>), as
// libibverbs reads it. An index beyond the table (PortAttr.PkeyTblLen)
// gives an error wrapping EINVAL. A RoCE port's table is one entry,
// 0xFFFF (the full-membership default P_Key).
func (c *Context) QueryPKey(port, index int) (uint16, error) {
	const op = "query pkey"
	n, err := c.pkeyTableLen(op, port)
	if err != nil {
		return 0, err
	}
	if index < 0 || index >= n {
		return 0, c.opErr(op, fmt.Errorf("port %d: P_Key index %d beyond the table of %d: %w", port, index, n, unix.EINVAL))
	}
	return c.pkeyAt(op, port, index)
}

// PKeyIndex returns the index of pkey, matched exactly (membership bit
// included), in port's P_Key table (ibv_get_pkey_index), for
// ConnectOptions.PKeyIndex; a P_Key the table does not hold gives an
// error wrapping ENOENT.
func (c *Context) PKeyIndex(port int, pkey uint16) (int, error) {
	const op = "get pkey index"
	n, err := c.pkeyTableLen(op, port)
	if err != nil {
		return 0, err
	}
	for i := range min(n, math.MaxUint16+1) {
		k, err := c.pkeyAt(op, port, i)
		if err != nil {
			return 0, err
		}
		if k == pkey {
			return i, nil
		}
	}
	return 0, c.opErr(op, fmt.Errorf("port %d: P_Key %#04x is not in the table of %d: %w", port, pkey, n, unix.ENOENT))
}

// pkeyTableLen returns the length of port's P_Key table (QUERY_PORT),
// after checking the port and that the context is open.
func (c *Context) pkeyTableLen(op string, port int) (int, error) {
	if err := checkPort(port); err != nil {
		return 0, c.opErr(op, err)
	}
	if err := c.use(op); err != nil {
		return 0, err
	}
	defer c.done()
	pa, err := c.queryPort(op, port)
	if err != nil {
		return 0, err
	}
	return pa.PkeyTblLen, nil
}

// pkeyAt reads entry index of port's P_Key table from sysfs ("0xffff").
func (c *Context) pkeyAt(op string, port, index int) (uint16, error) {
	p := filepath.Join(sysIB, c.dev.Name, "ports", strconv.Itoa(port), "pkeys", strconv.Itoa(index))
	s, err := readString(p)
	if err != nil {
		return 0, c.opErr(op, err)
	}
	v, err := strconv.ParseUint(s, 0, 16)
	if err != nil {
		return 0, c.opErr(op, fmt.Errorf("%s: %q: %w", p, s, unix.EINVAL))
	}
	return uint16(v), nil
}
