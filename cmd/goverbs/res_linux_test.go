package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// rdmaTool runs iproute2's rdma, which the VM harness puts into the
// guest, and returns its standard output.
func rdmaTool(t *testing.T, args ...string) string {
	t.Helper()
	const bin = "/usr/bin/rdma"
	if _, err := os.Stat(bin); err != nil {
		if testutil.InVM() {
			t.Fatalf("the VM harness installs iproute2's rdma: %v", err)
		}
		t.Skipf("no iproute2 rdma to compare with: %v", err)
	}
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	if triplet == "" {
		t.Skipf("no iproute2 libraries for %s in the VM", runtime.GOARCH)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH=/lib/"+triplet+":/usr/lib/"+triplet)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() != 0 {
		t.Fatalf("rdma %s: %v\n%s", strings.Join(args, " "), err, &stderr)
	}
	return string(out)
}

// resFixture makes objects of every kind res shows, on rxe0, for the
// test's life: a PD, a CQ, an MR; an RC pair in RTS that has carried a
// send, an RC QP in RESET, a UC QP in INIT, a UD QP in RTS; and through
// rdmacm a listener on 192.0.2.1 with one connection to it (three cm_ids
// and their QPs). It returns the QPs' numbers by name.
func resFixture(t *testing.T) map[string]uint32 {
	t.Helper()
	testutil.RequireDevice(t, "/dev/infiniband/rdma_cm")
	c := rdmatest.Open(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	q, err := c.NewCQ(cq.Config{Size: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	buf, err := uverbs.AllocBuffer(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	mr, err := pd.RegMR(buf.Bytes(), rdmatest.AllAccess)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	newQP := func(typ uverbs.QPType) *uverbs.QP {
		qp, err := pd.NewQP(uverbs.QPConfig{Type: typ, SendCQ: q, RecvCQ: q,
			Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { qp.Close() })
		return qp
	}
	a, b := newQP(uverbs.RC), newQP(uverbs.RC)
	rdmatest.ConnectRC(t, a, b)
	if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 2, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 4096, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	rdmatest.PollN(t, q, 2)
	reset := newQP(uverbs.RC)
	uc := newQP(uverbs.UC)
	rdmatest.Modify(t, uc, uverbs.QPAttr{State: uverbs.QPInit, Port: 1, AccessFlags: uverbs.AccessRemoteWrite},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags)
	ud := newQP(uverbs.UD)
	rdmatest.ReadyUD(t, ud, 0x11111111)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := rdmacm.Listen(ctx, "192.0.2.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan *rdmacm.Conn, 1)
	go func() {
		s, err := l.Accept(ctx)
		if err != nil {
			t.Error(err)
		}
		accepted <- s
	}()
	cl, err := rdmacm.Dial(ctx, l.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	if s := <-accepted; s != nil {
		t.Cleanup(func() { s.Close() })
	}
	return map[string]uint32{"rc": a.QPN(), "reset": reset.QPN(), "uc": uc.QPN(), "ud": ud.QPN(),
		"port": uint32(l.Addr().Port())}
}

// TestCLIRes compares goverbs res with rdma resource show, line for
// line, on the objects of resFixture and whatever else the kernel tracks
// (the GSI QP rdma_cm uses, owned by ib_core): the summary, every kind,
// and the filters.
func TestCLIRes(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	qpn := resFixture(t)
	pid := strconv.Itoa(os.Getpid())
	for _, args := range [][]string{
		{}, {"show"}, {"show", "rxe0"},
		{"show", "qp"}, {"show", "qp", "link", "rxe0"}, {"show", "qp", "link", "rxe0/1"}, {"show", "qp", "link", "rxe0/-"},
		{"show", "qp", "pid", pid}, {"show", "qp", "type", "RC"}, {"show", "qp", "type", "uc,ud"},
		{"show", "qp", "state", "RTS"}, {"show", "qp", "state", "reset,init"},
		{"show", "qp", "link", "rxe0/1", "type", "RC", "state", "RTS"},
		{"show", "qp", "lqpn", strconv.Itoa(int(qpn["ud"]))},
		{"show", "qp", "lqpn", strconv.Itoa(int(qpn["rc"])) + "-" + strconv.Itoa(int(qpn["ud"]))},
		{"show", "qp", "rqpn", strconv.Itoa(int(qpn["rc"]) + 1)}, {"show", "qp", "sq-psn", "100"},
		{"show", "qp", "path-mig-state", "MIGRATED"}, {"show", "qp", "pdn", "0-1000"},
		{"show", "cm_id"}, {"show", "cm_id", "link", "rxe0/1"}, {"show", "cm_id", "state", "LISTEN"},
		{"show", "cm_id", "ps", "TCP"}, {"show", "cm_id", "qp-type", "RC"}, {"show", "cm_id", "pid", pid},
		{"show", "cm_id", "src-addr", "192.0.2.1"}, {"show", "cm_id", "src-port", strconv.Itoa(int(qpn["port"]))},
		{"show", "cm_id", "dst-port", strconv.Itoa(int(qpn["port"]))},
		{"show", "cq"}, {"show", "cq", "dev", "rxe0"}, {"show", "cq", "pid", pid}, {"show", "cq", "users", "1-5"},
		{"show", "cq", "poll-ctx", "WORKQUEUE"},
		{"show", "mr"}, {"show", "mr", "dev", "rxe0", "pid", pid}, {"show", "mr", "mrlen", "65536"},
		{"show", "pd"}, {"show", "pd", "users", "0,1,2,3,4,5"}, {"show", "pd", "pid", pid},
		{"show", "ctx"}, {"show", "ctx", "pid", pid},
		{"list", "qp"}, {"qp"}, {"q", "ty", "RC"},
	} {
		name := "rdma resource " + strings.Join(args, " ")
		t.Run(name, func(t *testing.T) {
			// Each side twice, theirs between: the objects are quiet, so
			// the two reads of ours agree unless something else moved.
			for try := 1; ; try++ {
				ours1, errOut, st := runCmd(resTo, args...)
				if st != 0 || errOut != "" {
					t.Fatalf("goverbs res %s: exit status %d: %s", strings.Join(args, " "), st, errOut)
				}
				theirArgs := args
				if len(args) > 0 && args[0] != "show" && args[0] != "list" {
					theirArgs = append([]string{"show"}, args...) // rdma needs the word, goverbs not
				}
				theirs := rdmaTool(t, append([]string{"resource"}, theirArgs...)...)
				ours2, _, _ := runCmd(resTo, args...)
				if ours1 != ours2 && try < 5 {
					continue
				}
				if ours1 != theirs {
					t.Errorf("%s:\n%s\ngoverbs res:\n%s", name, theirs, ours1)
				} else if len(args) > 0 && args[0] == "show" && len(args) <= 2 {
					t.Logf("%s:\n%s", name, theirs)
				}
				return
			}
		})
	}
}

// TestCLIResErrors checks res's refusals: usage errors (exit status 2)
// and devices or ports that do not exist (1), each one line.
func TestCLIResErrors(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	for _, tc := range []struct {
		args   []string
		status int
		want   []string
	}{
		{[]string{"show", "nosuch"}, 1, []string{"nosuch", "no such RDMA device"}},
		{[]string{"show", "qp", "link", "nosuch/1"}, 1, []string{"nosuch", "no such RDMA device"}},
		{[]string{"show", "qp", "link", "rxe0/2"}, 1, []string{"rxe0 has no port 2"}},
		{[]string{"show", "pd", "dev", "nosuch"}, 1, []string{"nosuch", "no such RDMA device"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, status := runCmd(resTo, tc.args...)
			wantOneLineError(t, out, errOut, status, tc.status, tc.want...)
		})
	}
	for _, args := range [][]string{{"show", "srq"}, {"show", "qp", "dev", "rxe0"}, {"show", "qp", "lqpn"},
		{"show", "qp", "lqpn", "x"}, {"show", "pd", "link", "rxe0"}, {"show", "qp", "link", "rxe0/0"}} {
		if out, errOut, status := runCmd(resTo, args...); status != 2 || out != "" || !strings.HasPrefix(errOut, "goverbs: res") {
			t.Errorf("res %s: exit status %d, stdout %q, stderr %q; want 2, nothing, a usage error",
				strings.Join(args, " "), status, out, errOut)
		}
	}
}

// TestCLIStat compares goverbs stat with rdma statistic show, line for
// line, after traffic on rxe0: both when the counters are quiet (each of
// ours read before and after theirs, and equal).
func TestCLIStat(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	resFixture(t)
	for _, args := range [][]string{{}, {"show"}, {"show", "link", "rxe0"}, {"show", "link", "rxe0/1"}, {"list", "link"}} {
		name := "rdma statistic " + strings.Join(args, " ")
		t.Run(name, func(t *testing.T) {
			for try := 1; ; try++ {
				ours1, errOut, st := runCmd(statTo, args...)
				if st != 0 || errOut != "" {
					t.Fatalf("goverbs stat %s: exit status %d: %s", strings.Join(args, " "), st, errOut)
				}
				theirs := rdmaTool(t, append([]string{"statistic"}, args...)...)
				ours2, _, _ := runCmd(statTo, args...)
				if ours1 != ours2 && try < 10 {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				if ours1 != theirs {
					t.Errorf("%s:\n%s\ngoverbs stat:\n%s", name, theirs, ours1)
				} else {
					t.Logf("%s:\n%s", name, theirs)
				}
				if !strings.Contains(theirs, "link rxe0/1 ") {
					t.Errorf("%s lists no rxe0/1", name)
				}
				return
			}
		})
	}
	for _, tc := range []struct {
		args   []string
		status int
	}{
		{[]string{"show", "link", "nosuch"}, 1}, {[]string{"show", "link", "rxe0/2"}, 1},
		{[]string{"qp", "show"}, 2}, {[]string{"show", "link", "rxe0/x"}, 2}, {[]string{"show", "foo"}, 2},
	} {
		out, errOut, st := runCmd(statTo, tc.args...)
		if st != tc.status || out != "" || strings.Count(errOut, "\n") < 1 {
			t.Errorf("stat %s: exit status %d, stdout %q, stderr %q; want %d and an error",
				strings.Join(tc.args, " "), st, out, errOut, tc.status)
		}
	}
}

// obj builds a netlink object of rxe0 from attributes: uint32 values
// become u32 attributes, uint8 u8, uint64 u64, string NUL-terminated
// strings, []byte raw.
func obj(attrs map[uint16]any) netlink.ResObject {
	o := netlink.ResObject{Device: "rxe0", Attrs: map[uint16]netlink.Attr{}}
	for typ, v := range attrs {
		var b []byte
		switch v := v.(type) {
		case uint32:
			b = binary.NativeEndian.AppendUint32(nil, v)
		case uint8:
			b = []byte{v}
		case uint64:
			b = binary.NativeEndian.AppendUint64(nil, v)
		case string:
			b = append([]byte(v), 0)
		case []byte:
			b = v
		}
		o.Attrs[typ] = netlink.Attr{Type: typ, Data: b}
	}
	return o
}

// sockaddrIn is a struct sockaddr_in (or sockaddr_in6 for a 16-byte
// address) as the kernel puts it in a cm_id's address attributes.
func sockaddrIn(a netip.AddrPort) []byte {
	b := make([]byte, 128)
	if a.Addr().Is4() {
		binary.NativeEndian.PutUint16(b, unix.AF_INET)
		ip := a.Addr().As4()
		copy(b[4:], ip[:])
	} else {
		binary.NativeEndian.PutUint16(b, unix.AF_INET6)
		ip := a.Addr().As16()
		copy(b[8:], ip[:])
	}
	binary.BigEndian.PutUint16(b[2:], a.Port())
	return b
}

func fakeComm(pid uint32) (string, bool) {
	if pid == 99 {
		return "", false // gone
	}
	return "cmd_goverbs.tes", true
}

// The lines are rdma's (iproute2 6.1) on Linux 6.1, for the same objects.
func TestResLines(t *testing.T) {
	rc := map[uint16]any{uapi.RDMA_NLDEV_ATTR_PORT_INDEX: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_LQPN: uint32(17),
		uapi.RDMA_NLDEV_ATTR_RES_RQPN: uint32(18), uapi.RDMA_NLDEV_ATTR_RES_RQ_PSN: uint32(100),
		uapi.RDMA_NLDEV_ATTR_RES_SQ_PSN: uint32(101), uapi.RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE: uint8(0),
		uapi.RDMA_NLDEV_ATTR_RES_TYPE: uint8(2), uapi.RDMA_NLDEV_ATTR_RES_STATE: uint8(3),
		uapi.RDMA_NLDEV_ATTR_RES_PDN: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_PID: uint32(106)}
	gsi := map[uint16]any{uapi.RDMA_NLDEV_ATTR_PORT_INDEX: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_LQPN: uint32(1),
		uapi.RDMA_NLDEV_ATTR_RES_SQ_PSN: uint32(3), uapi.RDMA_NLDEV_ATTR_RES_TYPE: uint8(1),
		uapi.RDMA_NLDEV_ATTR_RES_STATE: uint8(3), uapi.RDMA_NLDEV_ATTR_RES_KERN_NAME: "ib_core"}
	reset := map[uint16]any{uapi.RDMA_NLDEV_ATTR_RES_LQPN: uint32(19), uapi.RDMA_NLDEV_ATTR_RES_RQPN: uint32(0),
		uapi.RDMA_NLDEV_ATTR_RES_RQ_PSN: uint32(0), uapi.RDMA_NLDEV_ATTR_RES_SQ_PSN: uint32(0),
		uapi.RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE: uint8(0), uapi.RDMA_NLDEV_ATTR_RES_TYPE: uint8(2),
		uapi.RDMA_NLDEV_ATTR_RES_STATE: uint8(0), uapi.RDMA_NLDEV_ATTR_RES_PDN: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_PID: uint32(106)}
	ud := map[uint16]any{uapi.RDMA_NLDEV_ATTR_PORT_INDEX: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_LQPN: uint32(21),
		uapi.RDMA_NLDEV_ATTR_RES_SQ_PSN: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_TYPE: uint8(4),
		uapi.RDMA_NLDEV_ATTR_RES_STATE: uint8(3), uapi.RDMA_NLDEV_ATTR_RES_PDN: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_PID: uint32(99)}
	listen := map[uint16]any{uapi.RDMA_NLDEV_ATTR_PORT_INDEX: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_CM_IDN: uint32(0),
		uapi.RDMA_NLDEV_ATTR_RES_STATE: uint8(8), uapi.RDMA_NLDEV_ATTR_RES_PS: uint32(uapi.RDMA_PS_TCP),
		uapi.RDMA_NLDEV_ATTR_RES_PID:      uint32(105),
		uapi.RDMA_NLDEV_ATTR_RES_SRC_ADDR: sockaddrIn(netip.MustParseAddrPort("192.0.2.1:37773")),
		uapi.RDMA_NLDEV_ATTR_RES_DST_ADDR: sockaddrIn(netip.MustParseAddrPort("0.0.0.0:0"))}
	conn6 := map[uint16]any{uapi.RDMA_NLDEV_ATTR_PORT_INDEX: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_CM_IDN: uint32(2),
		uapi.RDMA_NLDEV_ATTR_RES_LQPN: uint32(23), uapi.RDMA_NLDEV_ATTR_RES_TYPE: uint8(2),
		uapi.RDMA_NLDEV_ATTR_RES_STATE: uint8(5), uapi.RDMA_NLDEV_ATTR_RES_PS: uint32(uapi.RDMA_PS_TCP),
		uapi.RDMA_NLDEV_ATTR_RES_PID:      uint32(105),
		uapi.RDMA_NLDEV_ATTR_RES_SRC_ADDR: sockaddrIn(netip.MustParseAddrPort("[2001:db8::1]:7471")),
		uapi.RDMA_NLDEV_ATTR_RES_DST_ADDR: sockaddrIn(netip.MustParseAddrPort("[::1.2.3.4]:80"))}
	cqKern := map[uint16]any{uapi.RDMA_NLDEV_ATTR_RES_CQN: uint32(0), uapi.RDMA_NLDEV_ATTR_RES_CQE: uint32(1023),
		uapi.RDMA_NLDEV_ATTR_RES_USECNT: uint64(2), uapi.RDMA_NLDEV_ATTR_RES_POLL_CTX: uint8(2),
		uapi.RDMA_NLDEV_ATTR_DEV_DIM: uint8(0), uapi.RDMA_NLDEV_ATTR_RES_KERN_NAME: "ib_core"}
	cqUser := map[uint16]any{uapi.RDMA_NLDEV_ATTR_RES_CQN: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_CQE: uint32(127),
		uapi.RDMA_NLDEV_ATTR_RES_USECNT: uint64(10), uapi.RDMA_NLDEV_ATTR_DEV_DIM: uint8(0),
		uapi.RDMA_NLDEV_ATTR_RES_CTXN: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_PID: uint32(105)}
	mr := map[uint16]any{uapi.RDMA_NLDEV_ATTR_RES_MRN: uint32(0), uapi.RDMA_NLDEV_ATTR_RES_RKEY: uint32(0x2a8),
		uapi.RDMA_NLDEV_ATTR_RES_LKEY: uint32(0x2a8), uapi.RDMA_NLDEV_ATTR_RES_MRLEN: uint64(65536),
		uapi.RDMA_NLDEV_ATTR_RES_PDN: uint32(1), uapi.RDMA_NLDEV_ATTR_RES_PID: uint32(105)}
	pdKern := map[uint16]any{uapi.RDMA_NLDEV_ATTR_RES_PDN: uint32(0), uapi.RDMA_NLDEV_ATTR_RES_LOCAL_DMA_LKEY: uint32(0x174),
		uapi.RDMA_NLDEV_ATTR_RES_USECNT: uint64(1), uapi.RDMA_NLDEV_ATTR_RES_KERN_NAME: "a_kernel_user_of_many_letters"}
	ctx := map[uint16]any{uapi.RDMA_NLDEV_ATTR_RES_CTXN: uint32(2), uapi.RDMA_NLDEV_ATTR_RES_PID: uint32(105)}
	for _, tc := range []struct {
		name  string
		line  func(netlink.ResObject, uint32, resFilters, commFunc) (string, bool)
		attrs map[uint16]any
		port  uint32
		fs    resFilters
		want  string // "" when left out
	}{
		{"rc", qpLine, rc, 1, nil, "link rxe0/1 lqpn 17 rqpn 18 type RC state RTS rq-psn 100 sq-psn 101 path-mig-state MIGRATED pdn 1 pid 106 comm cmd_goverbs.tes \n"},
		{"rc asked for port 0", qpLine, rc, 0, nil, ""},
		{"gsi", qpLine, gsi, 1, nil, "link rxe0/1 lqpn 1 type GSI state RTS sq-psn 3 comm [ib_core] \n"},
		{"gsi filtered by pid", qpLine, gsi, 1, resFilters{{"pid", "1-1000"}}, ""},
		{"reset", qpLine, reset, 0, nil, "link rxe0/- lqpn 19 rqpn 0 type RC state RESET rq-psn 0 sq-psn 0 path-mig-state MIGRATED pdn 1 pid 106 comm cmd_goverbs.tes \n"},
		{"ud of a process gone", qpLine, ud, 1, nil, "link rxe0/1 lqpn 21 type UD state RTS sq-psn 1 pdn 1 pid 99 \n"},
		{"type filter", qpLine, rc, 1, resFilters{{"type", "ud,uc"}}, ""},
		{"state filter", qpLine, rc, 1, resFilters{{"state", "rts"}, {"lqpn", "10-20"}}, "link rxe0/1 lqpn 17 rqpn 18 type RC state RTS rq-psn 100 sq-psn 101 path-mig-state MIGRATED pdn 1 pid 106 comm cmd_goverbs.tes \n"},
		{"rqpn filter on ud", qpLine, ud, 1, resFilters{{"rqpn", "0"}}, ""},
		{"path-mig-state of ud reads MIGRATED", qpLine, ud, 1, resFilters{{"path-mig-state", "migrated"}}, "link rxe0/1 lqpn 21 type UD state RTS sq-psn 1 pdn 1 pid 99 \n"},
		{"listen", cmIDLine, listen, 1, nil, "link rxe0/1 cm-idn 0 state LISTEN ps TCP pid 105 comm cmd_goverbs.tes src-addr 192.0.2.1:37773 dst-addr 0.0.0.0:0 \n"},
		{"listen under port 0", cmIDLine, listen, 0, nil, ""},
		{"connected over IPv6", cmIDLine, conn6, 1, nil, "link rxe0/1 cm-idn 2 lqpn 23 qp-type RC state CONNECT ps TCP pid 105 comm cmd_goverbs.tes src-addr 2001:db8::1:7471 dst-addr ::1.2.3.4:80 \n"},
		{"src-port filter", cmIDLine, listen, 1, resFilters{{"src-port", "37773"}, {"state", "listen"}}, "link rxe0/1 cm-idn 0 state LISTEN ps TCP pid 105 comm cmd_goverbs.tes src-addr 192.0.2.1:37773 dst-addr 0.0.0.0:0 \n"},
		{"lqpn filter on a listener", cmIDLine, listen, 1, resFilters{{"lqpn", "0"}}, ""},
		{"dst-addr filter", cmIDLine, conn6, 1, resFilters{{"dst-addr", "::1.2.3.4"}}, "link rxe0/1 cm-idn 2 lqpn 23 qp-type RC state CONNECT ps TCP pid 105 comm cmd_goverbs.tes src-addr 2001:db8::1:7471 dst-addr ::1.2.3.4:80 \n"},
		{"ps filter", cmIDLine, conn6, 1, resFilters{{"ps", "udp"}}, ""},
		{"kernel cq", cqLine, cqKern, 0, nil, "dev rxe0 cqn 0 cqe 1023 users 2 poll-ctx WORKQUEUE adaptive-moderation off comm [ib_core] \n"},
		{"user cq", cqLine, cqUser, 0, nil, "dev rxe0 cqn 1 cqe 127 users 10 adaptive-moderation off ctxn 1 pid 105 comm cmd_goverbs.tes \n"},
		{"poll-ctx filter", cqLine, cqUser, 0, resFilters{{"poll-ctx", "workqueue"}}, ""},
		{"users filter", cqLine, cqUser, 0, resFilters{{"users", "1-5"}}, ""},
		{"mr", mrLine, mr, 0, nil, "dev rxe0 mrn 0 rkey 0x2a8 lkey 0x2a8 mrlen 65536 pdn 1 pid 105 comm cmd_goverbs.tes \n"},
		{"mr rkey filter, which rdma ignores", mrLine, mr, 0, resFilters{{"rkey", "1"}}, "dev rxe0 mrn 0 rkey 0x2a8 lkey 0x2a8 mrlen 65536 pdn 1 pid 105 comm cmd_goverbs.tes \n"},
		{"mrlen filter", mrLine, mr, 0, resFilters{{"mrlen", "4096"}}, ""},
		{"kernel pd, long name", pdLine, pdKern, 0, nil, "dev rxe0 pdn 0 local_dma_lkey 0x174 users 1 comm [a_kernel_user_of \n"},
		{"ctx", ctxLine, ctx, 0, nil, "dev rxe0 ctxn 2 pid 105 comm cmd_goverbs.tes \n"},
		{"ctx filtered", ctxLine, ctx, 0, resFilters{{"ctxn", "1"}}, ""},
		{"qp without its state", qpLine, map[uint16]any{uapi.RDMA_NLDEV_ATTR_RES_LQPN: uint32(1)}, 0, nil, ""},
		{"cm_id of another family", cmIDLine, map[uint16]any{uapi.RDMA_NLDEV_ATTR_RES_STATE: uint8(0),
			uapi.RDMA_NLDEV_ATTR_RES_PS: uint32(uapi.RDMA_PS_IB), uapi.RDMA_NLDEV_ATTR_RES_SRC_ADDR: []byte{27, 0, 0, 0}}, 0, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.line(obj(tc.attrs), tc.port, tc.fs, fakeComm)
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("got %q (%t)\nwant %q", got, ok, tc.want)
			}
		})
	}
}

func TestSummaryAndStatLines(t *testing.T) {
	r := netlink.RDMAResources{Index: 0, Device: "rxe0", Kinds: []string{"pd", "cq", "qp", "cm_id", "mr", "ctx", "srq"},
		Counts: map[string]uint64{"pd": 3, "cq": 4, "qp": 8, "cm_id": 3, "mr": 1, "ctx": 2, "srq": 0}}
	if got, want := summaryLine(r), "0: rxe0: pd 3 cq 4 qp 8 cm_id 3 mr 1 ctx 2 srq 0 \n"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	cs := []netlink.HWCounter{{Name: "sent_pkts", Value: 12}, {Name: "rcvd_pkts", Value: 12}, {Name: "duplicate_request"}}
	if got, want := statLine("rxe0", 1, cs), "link rxe0/1 sent_pkts 12 rcvd_pkts 12 duplicate_request 0 \n"; got != want {
		t.Errorf("stat %q, want %q", got, want)
	}
	for in, want := range map[string]string{"::": "::", "::1": "::1", "::1.2.3.4": "::1.2.3.4", "::0.0.1.2": "::102",
		"::ffff:1.2.3.4": "::ffff:1.2.3.4", "2001:db8::1": "2001:db8::1", "fe80::1:0:0:1": "fe80::1:0:0:1"} {
		if got := ntop6(netip.MustParseAddr(in).As16()); got != want {
			t.Errorf("ntop6(%s) = %s, want %s", in, got, want)
		}
	}
}

// FuzzResLines prints any set of attributes as every kind's line, with
// and without filters; nothing panics.
func FuzzResLines(f *testing.F) {
	qp := netlink.NewBuilder(nil)
	qp.Uint32(uapi.RDMA_NLDEV_ATTR_RES_LQPN, 17)
	qp.Uint32(uapi.RDMA_NLDEV_ATTR_RES_SQ_PSN, 1)
	qp.Add(uapi.RDMA_NLDEV_ATTR_RES_TYPE, []byte{2})
	qp.Add(uapi.RDMA_NLDEV_ATTR_RES_STATE, []byte{3})
	qp.String(uapi.RDMA_NLDEV_ATTR_RES_KERN_NAME, "ib_core")
	f.Add(qp.Bytes(), uint32(0))
	id := netlink.NewBuilder(nil)
	id.Add(uapi.RDMA_NLDEV_ATTR_RES_STATE, []byte{8})
	id.Uint32(uapi.RDMA_NLDEV_ATTR_RES_PS, uapi.RDMA_PS_TCP)
	id.Add(uapi.RDMA_NLDEV_ATTR_RES_SRC_ADDR, sockaddrIn(netip.MustParseAddrPort("[::1]:1")))
	id.Add(uapi.RDMA_NLDEV_ATTR_RES_DST_ADDR, []byte{2, 0})
	f.Add(id.Bytes(), uint32(1))
	fs := resFilters{{"lqpn", "1-5"}, {"type", "rc"}, {"src-addr", "1.2.3.4"}, {"pid", "1"}, {"users", "2"}}
	f.Fuzz(func(t *testing.T, b []byte, port uint32) {
		o := netlink.ResObject{Device: "rxe0", Attrs: map[uint16]netlink.Attr{}}
		for _, a := range netlink.ParseAttrs(b) {
			if !o.Has(a.Type) {
				o.Attrs[a.Type] = a
			}
		}
		for _, d := range resDumps {
			for _, f := range []resFilters{nil, fs} {
				if s, ok := d.line(o, port, f, fakeComm); ok != (s != "") || (ok && !strings.HasSuffix(s, " \n")) {
					t.Fatalf("line %q, %t", s, ok)
				}
			}
		}
	})
}
