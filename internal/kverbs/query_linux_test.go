package kverbs_test

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// conn opens a context on the harness's rxe0 and returns its transport;
// tweak adjusts the transport before GET_CONTEXT (to hide methods).
func conn(t *testing.T, tweak func(*transport.Conn)) *transport.Conn {
	t.Helper()
	testutil.RequireDevice(t, testutil.DevicePath)
	fd, err := unix.Open(testutil.DevicePath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	c := transport.NewConn(fd, uapi.RDMA_DRIVER_RXE)
	if tweak != nil {
		tweak(c)
	}
	if _, err := kverbs.GetContext(c, nil, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// The kernel says how much of the extended response it filled: all of it
// on the kernels we test, through INVOKE_WRITE and write(2) alike.
func TestQueryDeviceResponseLength(t *testing.T) {
	for _, path := range []struct {
		name  string
		tweak func(*transport.Conn)
	}{
		{"INVOKE_WRITE", nil},
		{"write(2)", func(c *transport.Conn) { c.ForceWriteSyscall() }},
	} {
		t.Run(path.name, func(t *testing.T) {
			r, err := kverbs.QueryDevice(conn(t, path.tweak))
			if err != nil {
				t.Fatal(err)
			}
			if want := uint32(unsafe.Sizeof(r)); r.ResponseLength != want {
				t.Errorf("response_length %d, want %d", r.ResponseLength, want)
			}
			if r.Base.PhysPortCnt != 1 || r.Base.MaxCQE == 0 {
				t.Errorf("base: %+v", r.Base)
			}
		})
	}
}

func TestQueryPortAndGIDs(t *testing.T) {
	c := conn(t, nil)
	p, err := kverbs.QueryPort(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kverbs.QueryPort(c, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("port 0: %v, want EINVAL", err)
	}
	ents := make([]kverbs.GIDEntry, kverbs.MaxGIDTableEntries+10)
	n, err := kverbs.QueryGIDTable(c, ents)
	if err != nil || n < 1 || n > int(p.LegacyResp.GIDTblLen) {
		t.Fatalf("QueryGIDTable: %d, %v", n, err)
	}
	for _, e := range ents[:n] {
		got, err := kverbs.QueryGIDEntry(c, e.PortNum, e.GIDIndex)
		if err != nil || got != e {
			t.Errorf("QueryGIDEntry(%d, %d) = %+v, %v; the table has %+v", e.PortNum, e.GIDIndex, got, err, e)
		}
	}
	// ibv_query_gid_table(3): EINVAL when max_entries is too small.
	if n > 1 {
		if _, err := kverbs.QueryGIDTable(c, ents[:1]); !errors.Is(err, unix.EINVAL) {
			t.Errorf("a 1-entry table for %d GIDs: %v, want EINVAL", n, err)
		}
	}
	if _, err := kverbs.QueryGIDTable(c, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("no room: %v, want EINVAL", err)
	}
	if _, err := kverbs.QueryGIDEntry(c, 1, p.LegacyResp.GIDTblLen-1); !errors.Is(err, unix.ENODATA) {
		t.Errorf("the last, empty entry: %v, want ENODATA", err)
	}
}
