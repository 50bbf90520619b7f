package uverbs_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// counters reads port 1's counters into a map, failing the test on an
// error.
func counters(t *testing.T, c *uverbs.Context) (map[string]uint64, []string) {
	t.Helper()
	cs, err := c.PortCounters(1)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	var names []string
	for _, x := range cs {
		m[x.Name] = x.Value
		names = append(names, x.Name)
	}
	return m, names
}

// rxe counts its packets per port: the counters agree with the port's
// sysfs hw_counters when quiet, and move by the packets a test sends.
func TestPortCounters(t *testing.T) {
	e := newQPEnv(t)
	before, names := counters(t, e.ctx)
	for _, want := range []string{"sent_pkts", "rcvd_pkts"} {
		if _, ok := before[want]; !ok {
			t.Errorf("no counter %s among %v", want, names)
		}
	}
	// The same numbers as sysfs, when nothing moved between two reads.
	for try := 0; ; try++ {
		a, _ := counters(t, e.ctx)
		sys := map[string]uint64{}
		for _, n := range names {
			b, err := os.ReadFile("/sys/class/infiniband/rxe0/ports/1/hw_counters/" + n)
			if err != nil {
				t.Fatal(err)
			}
			v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				t.Fatalf("hw_counters/%s: %v", n, err)
			}
			sys[n] = v
		}
		b, _ := counters(t, e.ctx)
		if !mapsEqual(a, b) && try < 5 {
			continue
		}
		if !mapsEqual(a, sys) {
			t.Errorf("netlink %v, sysfs %v", a, sys)
		}
		break
	}

	const n = 8
	x, y := e.qp(t, uverbs.RC), e.qp(t, uverbs.RC)
	rdmatest.ConnectRC(t, x, y)
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := e.pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	before, _ = counters(t, e.ctx)
	for i := range n {
		if _, err := y.PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 2048, 64)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := x.PostSend([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 64)}}}); err != nil {
			t.Fatal(err)
		}
		rdmatest.PollN(t, e.cq, 2)
	}
	after, _ := counters(t, e.ctx)
	for _, name := range []string{"sent_pkts", "rcvd_pkts"} {
		if d := after[name] - before[name]; d < n {
			t.Errorf("%s moved by %d over %d sends, want at least %d", name, d, n, n)
		}
	}

	for _, bad := range []struct {
		port int
		want error
	}{{0, unix.EINVAL}, {2, unix.EINVAL}, {256, unix.EINVAL}} {
		_, err := e.ctx.PortCounters(bad.port)
		var oe *uverbs.OpError
		if !errors.Is(err, bad.want) || !errors.As(err, &oe) || oe.Op != "read port counters" || oe.Device != "rxe0" {
			t.Errorf("port %d: %v, want an OpError of read port counters on rxe0 wrapping %v", bad.port, err, bad.want)
		}
	}
	c2 := openRXE(t)
	c2.Close()
	if _, err := c2.PortCounters(1); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
