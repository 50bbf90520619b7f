package rdmatest

import (
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

// Modify moves qp to a state and checks that it got there.
func Modify(tb testing.TB, qp *uverbs.QP, a uverbs.QPAttr, m uverbs.QPAttrMask) {
	tb.Helper()
	if err := qp.Modify(&a, m); err != nil {
		tb.Fatal(err)
	}
	got, err := qp.Query(uverbs.QPAttrState)
	if err != nil {
		tb.Fatal(err)
	}
	if got.State != a.State {
		tb.Fatalf("QP %d is %v after modify to %v", qp.QPN(), got.State, a.State)
	}
}

// AllAccess is every remote right a test QP or MR gets.
const AllAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite | uverbs.AccessRemoteAtomic

// ConnectRC brings two RC QPs of one device to RTS, each the other's peer,
// over GID index 1 (RoCE v2).
func ConnectRC(tb testing.TB, a, b *uverbs.QP) {
	tb.Helper()
	gi := GIDIndex()
	gid := GID(tb, gi)
	for _, p := range []struct{ qp, peer *uverbs.QP }{{a, b}, {b, a}} {
		Modify(tb, p.qp, uverbs.QPAttr{State: uverbs.QPInit, Port: 1, AccessFlags: AllAccess},
			uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags)
		Modify(tb, p.qp, uverbs.QPAttr{State: uverbs.QPRTR, PathMTU: uverbs.MTU1024, DestQPN: p.peer.QPN(),
			RQPSN: 100, MaxDestRdAtomic: 4, MinRNRTimer: 1,
			AH: uverbs.AHAttr{IsGlobal: true, Port: 1, GRH: uverbs.GlobalRoute{DGID: gid, SGIDIndex: uint8(gi), HopLimit: 64}}},
			uverbs.QPAttrState|uverbs.QPAttrAV|uverbs.QPAttrPathMTU|uverbs.QPAttrDestQPN|
				uverbs.QPAttrRQPSN|uverbs.QPAttrMaxDestRdAtomic|uverbs.QPAttrMinRNRTimer)
		Modify(tb, p.qp, uverbs.QPAttr{State: uverbs.QPRTS, SQPSN: 100, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
			uverbs.QPAttrState|uverbs.QPAttrSQPSN|uverbs.QPAttrTimeout|uverbs.QPAttrRetryCnt|
				uverbs.QPAttrRNRRetry|uverbs.QPAttrMaxQPRdAtomic)
	}
}

// ReadyUD brings a UD QP to RTS with the given Q_Key.
func ReadyUD(tb testing.TB, qp *uverbs.QP, qkey uint32) {
	tb.Helper()
	Modify(tb, qp, uverbs.QPAttr{State: uverbs.QPInit, Port: 1, QKey: qkey},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrQKey)
	Modify(tb, qp, uverbs.QPAttr{State: uverbs.QPRTR}, uverbs.QPAttrState)
	Modify(tb, qp, uverbs.QPAttr{State: uverbs.QPRTS, SQPSN: 1}, uverbs.QPAttrState|uverbs.QPAttrSQPSN)
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
