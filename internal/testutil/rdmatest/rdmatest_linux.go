package rdmatest

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uverbs"
)

// Open opens the test device (rxe0, or a context on the mlx5 model:
// EnvDevice), closing it when the test ends.
func Open(tb testing.TB) *uverbs.Context {
	tb.Helper()
	if OnModel() {
		return openModel(tb)
	}
	testutil.RequireDevice(tb, testutil.DevicePath)
	c, err := uverbs.Open(DeviceName())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// GID reads GID index i of the test device's port 1: from sysfs, or on
// the model from the test's context.
func GID(tb testing.TB, i int) uverbs.GID {
	tb.Helper()
	if OnModel() {
		return modelGID(tb, i)
	}
	b, err := os.ReadFile("/sys/class/infiniband/" + DeviceName() + "/ports/1/gids/" + strconv.Itoa(i))
	if err != nil {
		tb.Fatal(err)
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(b)))
	if err != nil {
		tb.Fatalf("GID %d: %v", i, err)
	}
	return uverbs.GID(a.As16())
}

// DeviceReady says why the RDMA device name, made (again) a moment ago,
// is not yet usable, or returns its GID at index 1 (its IPv4 address's on
// rxe): it opens, port 1 is active, and that GID is set.
func DeviceReady(name string) (uverbs.GID, error) {
	c, err := uverbs.Open(name)
	if err != nil {
		return uverbs.GID{}, err
	}
	defer c.Close()
	p, err := c.QueryPort(1)
	if err != nil {
		return uverbs.GID{}, err
	}
	if p.State != uverbs.PortActive {
		return uverbs.GID{}, fmt.Errorf("port 1 is %v", p.State)
	}
	g, err := c.QueryGID(1, 1)
	if err != nil {
		return uverbs.GID{}, err
	}
	if g.GID == (uverbs.GID{}) {
		return uverbs.GID{}, fmt.Errorf("GID index 1 is not set")
	}
	return g.GID, nil
}

// Modify moves qp to a state and checks that it got there.
func Modify(tb testing.TB, qp *uverbs.QP, a uverbs.QPAttr, m uverbs.QPAttrMask) {
	tb.Helper()
	if err := qp.Modify(&a, m); err != nil {
		tb.Fatal(err)
	}
	checkState(tb, qp, a.State)
}

// AllAccess is every remote right a test QP or MR gets.
const AllAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite | uverbs.AccessRemoteAtomic

// ConnectRC brings two RC QPs of one device to RTS, each the other's
// peer, with uverbs' QP.ConnectRC: over GID index GIDIndex() (1, RoCE v2
// on rxe), every remote right, four RDMA reads or atomics in flight each
// way, and an RNR timer of 1.
func ConnectRC(tb testing.TB, a, b *uverbs.QP) {
	tb.Helper()
	gi := GIDIndex()
	ea := uverbs.Endpoint{QPN: a.QPN(), PSN: 100, GID: GID(tb, gi)}
	eb := uverbs.Endpoint{QPN: b.QPN(), PSN: 100, GID: ea.GID}
	opts := &uverbs.ConnectOptions{Port: 1, Access: AllAccess, PathMTU: uverbs.MTU1024, GIDIndex: gi,
		MaxRdAtomic: 4, MaxDestRdAtomic: 4, MinRNRTimer: 1}
	if gi == 0 { // looked up by GID: the type of entry 0 picks it among equal GIDs
		e, err := a.PD().Context().QueryGID(1, 0)
		if err != nil {
			tb.Fatal(err)
		}
		opts.GIDType = e.Type
	}
	for _, p := range []struct {
		qp          *uverbs.QP
		local, peer uverbs.Endpoint
	}{{a, ea, eb}, {b, eb, ea}} {
		if err := p.qp.ConnectRC(p.local, p.peer, opts); err != nil {
			tb.Fatal(err)
		}
		checkState(tb, p.qp, uverbs.QPRTS)
	}
}

// ReadyUD brings a UD QP to RTS with the given Q_Key (QP.ConnectUD).
func ReadyUD(tb testing.TB, qp *uverbs.QP, qkey uint32) {
	tb.Helper()
	if err := qp.ConnectUD(uverbs.Endpoint{QPN: qp.QPN(), PSN: 1}, &uverbs.ConnectOptions{Port: 1, QKey: qkey}); err != nil {
		tb.Fatal(err)
	}
	checkState(tb, qp, uverbs.QPRTS)
}

func checkState(tb testing.TB, qp *uverbs.QP, want uverbs.QPState) {
	tb.Helper()
	got, err := qp.Query(uverbs.QPAttrState)
	if err != nil {
		tb.Fatal(err)
	}
	if got.State != want {
		tb.Fatalf("QP %d is %v, want %v", qp.QPN(), got.State, want)
	}
}

// PollN polls q until n completions came, or fails the test after 10 s.
func PollN(tb testing.TB, q *cq.CQ, n int) []cq.WC {
	tb.Helper()
	out := make([]cq.WC, 0, n)
	buf := make([]cq.WC, 16)
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		k, err := q.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				tb.Fatalf("got %d of %d completions in 10 s: %+v", len(out), n, out)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return out
}

// SGE returns mr's entry for n bytes at off (uverbs.MR.SGE), failing the
// test on an error.
func SGE(tb testing.TB, mr *uverbs.MR, off, n int) uverbs.SGE {
	tb.Helper()
	s, err := mr.SGE(off, n)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
