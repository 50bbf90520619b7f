package reliability

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// Context.Close with a PD, MRs (one over a Buffer, one on the Go heap),
// CQs on a channel, QPs (RC and UD) and an AH still open frees every
// kernel object: rxe0's resource counts (RDMA netlink RES_GET) rose
// while they lived and are back to what they were before, with nothing
// but the Context closed. The objects left behind then answer ErrClosed,
// and the Buffer under the dead MR can be freed.
func TestContextCloseFreesEverything(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	before := rdmatest.RXECounts(t)
	c, err := uverbs.Open("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			c.Close()
			t.Fatal(err)
		}
	}
	pd, err := c.AllocPD()
	must(err)
	buf, err := uverbs.AllocBuffer(1 << 16)
	must(err)
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	must(err)
	heapMR, err := pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite)
	must(err)
	ch, err := c.NewCompChannel()
	must(err)
	scq, err := c.NewCQ(cq.Config{Size: 64, Channel: ch})
	must(err)
	rcq, err := c.NewCQ(cq.Config{Size: 64, Channel: ch})
	must(err)
	must(rcq.ReqNotify(cq.NextCompletion))
	qcap := uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}
	rc, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: scq, RecvCQ: rcq, Cap: qcap})
	must(err)
	ud, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.UD, SendCQ: scq, RecvCQ: rcq, Cap: qcap})
	must(err)
	_, err = rc.PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 64)}}})
	must(err)
	ah, err := pd.NewAH(uverbs.AHAttr{IsGlobal: true, Port: 1,
		GRH: uverbs.GlobalRoute{DGID: rdmatest.GID(t, 1), SGIDIndex: 1, HopLimit: 64}})
	must(err)

	during := rdmatest.RXECounts(t)
	for _, k := range []string{"ctx", "pd", "cq", "qp", "mr"} {
		if _, ok := before[k]; ok && during[k] <= before[k] {
			t.Errorf("%s count %d with the objects open, %d before: the counts miss them", k, during[k], before[k])
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Context.Close: %v", err)
	}
	var after map[string]uint64
	if !testutil.WaitUntil(10*time.Second, func() bool { after = rdmatest.RXECounts(t); return cmp.Equal(before, after) }) {
		t.Errorf("resources of rxe0 after Context.Close (-before +after):\n%s\nwith the objects open: %v\n"+
			"mappings of the uverbs device still in the process (each holds its file, so the kernel has not released the context):\n%s",
			cmp.Diff(before, after), during, uverbsMappings(t))
	} else {
		t.Logf("before %v, with the objects open %v, after Context.Close: the same as before", before, during)
	}

	// What the user still holds is closed, and closing it touches nothing.
	for name, close := range map[string]func() error{
		"qp rc": rc.Close, "qp ud": ud.Close, "ah": ah.Close, "mr": mr.Close, "heap mr": heapMR.Close,
		"cq send": scq.Close, "cq recv": rcq.Close, "pd": pd.Close,
	} {
		if err := close(); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("%s Close after Context.Close: %v, want ErrClosed", name, err)
		}
	}
	if err := buf.Close(); err != nil {
		t.Errorf("Buffer.Close under an MR of a closed context: %v", err)
	}
	ch.Close()
}

// uverbsMappings returns the lines of /proc/self/maps that map a uverbs
// char device.
func uverbsMappings(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "/dev/infiniband/uverbs") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, "\n")
}
