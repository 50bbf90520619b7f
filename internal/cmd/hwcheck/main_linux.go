package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/devhook"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/mlx5model"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// env is the device the checklist runs on: a ConnectX, or the model.
type env struct {
	dev   uverbs.Device
	model *mlx5model.Device // nil on hardware
	gid   int
	root  string // the module's root, for go test and go build
	suite bool
}

func main() {
	model := flag.Bool("model", false, "run every step against internal/mlx5model instead of hardware")
	devName := flag.String("dev", "", "mlx5 `device` to check (default: every one this machine has)")
	gid := flag.Int("gid", gidDefault(), "port 1's GID `index` the loopback connections use (GOVERBS_TEST_GID_INDEX; default: the first RoCE v2 GID, found with FindGID)")
	suite := flag.Bool("suite", true, "run the conformance suite and the memory-window tests as the last steps")
	flag.Parse()
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hwcheck:", err)
		os.Exit(2)
	}
	var envs []*env
	if *model {
		envs = append(envs, &env{dev: uverbs.Device{Name: "mlx5_0", Path: "(model)", DriverID: uapi.RDMA_DRIVER_MLX5}, gid: *gid, root: root, suite: *suite})
	} else {
		devs, _ := uverbs.Devices()
		for _, d := range devs {
			if d.DriverID == uapi.RDMA_DRIVER_MLX5 && (*devName == "" || d.Name == *devName) {
				envs = append(envs, &env{dev: d, gid: *gid, root: root, suite: *suite})
			}
		}
	}
	if len(envs) == 0 {
		fmt.Println("mlx5 hardware checklist: NOT RUN -- no mlx5 device on this machine (the mlx5 provider is tested against internal/mlx5model only; go run ./internal/cmd/hwcheck -model runs the checklist there)")
		return
	}
	failed := false
	for _, e := range envs {
		if !e.run() {
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func gidDefault() int {
	if v, err := strconv.Atoi(os.Getenv("GOVERBS_TEST_GID_INDEX")); err == nil {
		return v
	}
	return -1 // FindGID's
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return "", fmt.Errorf("cannot find the goverbs module (run from its tree): %v", err)
	}
	return filepath.Dir(string(bytes.TrimSpace(out))), nil
}

// step is one line of the checklist.
type step struct {
	name string
	run  func(e *env) (string, error)
}

// errSkip marks a step that did not apply (its detail says why).
var errSkip = errors.New("skipped")

var steps = []step{
	{"open, dynamic UARs", (*env).openDynamic},
	{"open, static UARs forced", (*env).openStatic},
	{"cqe_version", (*env).cqeVersion},
	{"CQ create/poll/arm/event", (*env).cqEvent},
	{"CQ resize across the wrap", (*env).resizeWrap},
	{"QP reset cleans its CQEs", (*env).resetCleans},
	{"arm_sn over 1,000 events", (*env).armSN},
	{"RC ping-pong", func(e *env) (string, error) { return e.pingpong("rc") }},
	{"UD ping-pong", func(e *env) (string, error) { return e.pingpong("ud") }},
	{"conformance suite", func(e *env) (string, error) { return e.goTest("./test/conformance/", "") }},
	{"memory windows (UMR WQEs)", func(e *env) (string, error) { return e.goTest("./uverbs/", "^TestMemoryWindow") }},
	{"completion timestamps", func(e *env) (string, error) { return e.goTest("./uverbs/", "^TestCQTimestamps$") }},
}

// run runs the steps on e, printing a line for each and then the
// summary; it reports whether none failed.
func (e *env) run() bool {
	where := e.dev.Name
	if e.model != nil || e.dev.Path == "(model)" {
		where += " (internal/mlx5model)"
	}
	var lines []string
	pass, fail, skip := 0, 0, 0
	for i, s := range steps {
		if e.dev.Path == "(model)" {
			e.model = mlx5model.New(mlx5model.Options{}) // a fresh device for each step
		}
		t0 := time.Now()
		detail, err := e.guard(s.run)
		if e.model != nil {
			if verr := e.model.Close(); verr != nil && err == nil {
				err = fmt.Errorf("the model found the provider at fault: %v", verr)
			}
		}
		verdict := "PASS"
		switch {
		case errors.Is(err, errSkip):
			verdict, skip = "SKIP", skip+1
		case err != nil:
			verdict, fail = "FAIL", fail+1
			detail = strings.TrimSpace(detail + " " + err.Error())
		default:
			pass++
		}
		line := fmt.Sprintf("%2d. %-4s %-26s %s (%v)", i+1, verdict, s.name, detail, time.Since(t0).Round(time.Millisecond))
		fmt.Println(line)
		lines = append(lines, line)
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	fmt.Printf("\n--- mlx5 hardware checklist: paste from here ---\n```text\n")
	fmt.Printf("device %s, %s, kernel %s, %s/%s, %s\n", where, e.firmware(), unix.ByteSliceToString(uts.Release[:]),
		runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Printf("%s\n", e.revision())
	for _, l := range lines {
		fmt.Println(l)
	}
	fmt.Printf("result: %d passed, %d failed, %d skipped\n```\n", pass, fail, skip)
	return fail == 0
}

// guard runs f, turning a panic into the step's failure.
func (e *env) guard(f func(*env) (string, error)) (detail string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f(e)
}

func (e *env) firmware() string {
	if e.dev.Path == "(model)" {
		e.model = mlx5model.New(mlx5model.Options{})
		defer e.model.Close()
	}
	c, done, err := e.open("")
	if err != nil {
		return "firmware unknown"
	}
	defer done()
	a, err := c.QueryDevice()
	if err != nil {
		return "firmware unknown"
	}
	return fmt.Sprintf("fw %s, vendor part %d", a.FWVersion, a.VendorPartID)
}

func (e *env) revision() string {
	out, err := exec.Command("git", "-C", e.root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "goverbs (revision unknown)"
	}
	return "goverbs " + strings.TrimSpace(string(out))
}

// open opens a context on the device with the UARs asked for ("", "dynamic"
// or "static": provider.EnvMLX5UAR); done closes it.
func (e *env) open(uars string) (*uverbs.Context, func(), error) {
	os.Setenv(provider.EnvMLX5UAR, uars)
	defer os.Unsetenv(provider.EnvMLX5UAR)
	if e.model == nil {
		c, err := e.dev.Open()
		if err != nil {
			return nil, nil, err
		}
		return c, func() { c.Close() }, nil
	}
	mc, err := e.model.NewContext()
	if err != nil {
		return nil, nil, err
	}
	x, err := devhook.Open(e.dev.Name, uapi.RDMA_DRIVER_MLX5, mc.FD(), mc)
	if err != nil {
		mc.Close()
		return nil, nil, err
	}
	c := x.(*uverbs.Context)
	return c, func() { c.Close(); mc.Close() }, nil
}

// probe runs GET_CONTEXT on a fresh fd with the mlx5 request the provider
// sends (with or without asking for dynamic UARs) and returns the
// kernel's answer, which no public API shows.
func (e *env) probe(dynamic bool) (uapi.Mlx5IBAllocUcontextResp, error) {
	var resp uapi.Mlx5IBAllocUcontextResp
	req := uapi.Mlx5IBAllocUcontextReqV2{TotalNumBfregs: 16, NumLowLatencyBfregs: 4, MaxCQEVersion: 1, LibCaps: uapi.MLX5_LIB_CAP_4K_UAR}
	if dynamic {
		req.LibCaps |= uapi.MLX5_LIB_CAP_DYN_UAR
	}
	var conn *transport.Conn
	if e.model != nil {
		mc, err := e.model.NewContext()
		if err != nil {
			return resp, err
		}
		defer mc.Close()
		conn = transport.NewKernelConn(mc.FD(), uapi.RDMA_DRIVER_MLX5, mc)
	} else {
		fd, err := unix.Open(e.dev.Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return resp, err
		}
		defer unix.Close(fd)
		conn = transport.NewConn(fd, uapi.RDMA_DRIVER_MLX5)
	}
	kc, err := kverbs.GetContext(conn, bytesOf(&req), bytesOf(&resp))
	if err == nil && kc.AsyncFD > 0 {
		unix.Close(kc.AsyncFD)
	}
	return resp, err
}

func (e *env) openDynamic() (string, error) {
	r, err := e.probe(true)
	if err != nil {
		return "", fmt.Errorf("GET_CONTEXT asking for dynamic UARs: %w", err)
	}
	if r.TotBfregs != 0 {
		return "", fmt.Errorf("the kernel answered %d static registers: no dynamic UARs (kernel < 5.8?)", r.TotBfregs)
	}
	detail, err := e.openAndWrite("dynamic")
	return "granted; " + detail, err
}

func (e *env) openStatic() (string, error) {
	r, err := e.probe(false)
	if err != nil {
		return "", fmt.Errorf("GET_CONTEXT without dynamic UARs: %w", err)
	}
	detail, err := e.openAndWrite("static")
	return fmt.Sprintf("%d registers of %d bytes; %s", r.TotBfregs, r.BFRegSize, detail), err
}

// openAndWrite opens a context with the UARs asked for and rings both
// doorbells: an RDMA write and an armed event on a loopback RC pair.
func (e *env) openAndWrite(uars string) (string, error) {
	f, err := e.fixture(uars, 16, true)
	if err != nil {
		return "", err
	}
	defer f.close()
	if err := f.write(0); err != nil {
		return "", err
	}
	if _, err := f.poll(1); err != nil {
		return "", err
	}
	if err := f.event(1); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s UARs: RDMA write and event on QP %#x", uars, f.a.QPN()), nil
}

func (e *env) cqeVersion() (string, error) {
	r, err := e.probe(true)
	if err != nil {
		return "", err
	}
	if r.CQEVersion > 1 {
		return "", fmt.Errorf("cqe_version %d: goverbs knows 0 and 1", r.CQEVersion)
	}
	return fmt.Sprintf("cqe_version %d (asked 1), %d-byte cache lines, max %d send WQEBBs", r.CQEVersion, r.CacheLineSize, r.MaxSendWqebb), nil
}

func (e *env) cqEvent() (string, error) {
	f, err := e.fixture("", 16, true)
	if err != nil {
		return "", err
	}
	defer f.close()
	if n, err := f.scq.Poll(make([]cq.WC, 4)); err != nil || n != 0 {
		return "", fmt.Errorf("a new CQ polls %d, %v", n, err)
	}
	if err := f.event(3); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d entries, 3 events with their completions", f.scq.Size()), nil
}

func (e *env) resizeWrap() (string, error) {
	f, err := e.fixture("", 8, false)
	if err != nil {
		return "", err
	}
	defer f.close()
	size := f.scq.Size()
	// Take the consumer index to two before the ring's end, then leave
	// four completions in it across the end, and resize.
	wr := uint64(0)
	for range size - 2 {
		if err := f.write(wr); err != nil {
			return "", err
		}
		wr++
		if _, err := f.poll(1); err != nil {
			return "", err
		}
	}
	for range 4 {
		if err := f.write(wr); err != nil {
			return "", err
		}
		wr++
	}
	time.Sleep(50 * time.Millisecond)
	if err := f.scq.Resize(4 * size); err != nil {
		return "", err
	}
	wcs, err := f.poll(4)
	if err != nil {
		return "", err
	}
	for i, w := range wcs {
		if w.WRID != uint64(size-2+i) || w.Status != cq.Success {
			return "", fmt.Errorf("completion %d after the resize: %+v", i, w)
		}
	}
	return fmt.Sprintf("%d to %d entries with 4 completions across the end, in order", size, f.scq.Size()), nil
}

func (e *env) resetCleans() (string, error) {
	f, err := e.fixture("", 64, false)
	if err != nil {
		return "", err
	}
	defer f.close()
	for i := range 5 {
		if err := f.write(uint64(i)); err != nil {
			return "", err
		}
	}
	time.Sleep(100 * time.Millisecond) // the device writes the five CQEs
	// Both QPs to RESET (b holds no CQE), connected again: a's next
	// completion is the first the CQ gives, if the five went with the reset.
	for _, q := range []*uverbs.QP{f.a, f.b} {
		if err := modify(q, uverbs.QPAttr{State: uverbs.QPReset}, uverbs.QPAttrState); err != nil {
			return "", err
		}
	}
	if err := connectRC(f.a, f.b, f.gid); err != nil {
		return "", err
	}
	if err := f.post(f.a, 99); err != nil {
		return "", err
	}
	wcs, err := f.poll(1)
	if err != nil {
		return "", err
	}
	time.Sleep(50 * time.Millisecond)
	n, err := f.scq.Poll(make([]cq.WC, 8))
	if err != nil || wcs[0].WRID != 99 || n != 0 {
		return "", fmt.Errorf("after RESET the CQ gave %+v and %d more (%v): the reset QP's 5 CQEs should be gone", wcs[0], n, err)
	}
	return "5 CQEs of the reset QP gone; its first completion after RTS again is the CQ's only one", nil
}

func (e *env) armSN() (string, error) {
	f, err := e.fixture("", 16, true)
	if err != nil {
		return "", err
	}
	defer f.close()
	if err := f.event(1000); err != nil {
		return "", err
	}
	return "1,000 arms, 1,000 events, each with its completion", nil
}

// goTest runs a package's tests (those run matches, or all) on the
// device: the conformance suite, and uverbs' memory-window tests, which
// prove the UMR WQEs the model checks against rdma-core's layout.
func (e *env) goTest(pkg, run string) (string, error) {
	if !e.suite {
		return "-suite=false", errSkip
	}
	args := []string{"test", "-count=1"}
	if run != "" {
		args = append(args, "-run", run)
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = e.root
	dev := e.dev.Name
	if e.dev.Path == "(model)" {
		dev = "mlx5model"
	}
	if err := e.findGID(nil); err != nil {
		return "", err
	}
	cmd.Env = append(os.Environ(), "GOVERBS_TEST_DEVICE="+dev, "GOVERBS_TEST_GID_INDEX="+strconv.Itoa(e.gid))
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := strings.Join(strings.Fields(lines[len(lines)-1]), " ")
	if err != nil {
		os.Stdout.Write(out)
		return "", fmt.Errorf("go test %s (GOVERBS_TEST_DEVICE=%s): %v: %s", strings.Join(args[2:], " ")+" "+pkg, dev, err, last)
	}
	return "GOVERBS_TEST_DEVICE=" + dev + ": " + last, nil
}

// findGID sets e.gid, when no -gid was given, to port 1's first RoCE v2
// GID's index, once: the steps that run rdma-core's programs and the
// suite take the index.
func (e *env) findGID(ctx *uverbs.Context) error {
	if e.gid >= 0 {
		return nil
	}
	if ctx == nil {
		c, done, err := e.open("")
		if err != nil {
			return err
		}
		defer done()
		ctx = c
	}
	g, err := ctx.FindGID(1, uverbs.GIDTypeRoCEv2, netip.Addr{})
	if err != nil {
		return err
	}
	e.gid = g.Index
	return nil
}

func modify(qp *uverbs.QP, a uverbs.QPAttr, m uverbs.QPAttrMask) error {
	if err := qp.Modify(&a, m); err != nil {
		return fmt.Errorf("modify QP %#x to %v: %w", qp.QPN(), a.State, err)
	}
	return nil
}

const allAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite | uverbs.AccessRemoteAtomic

// loopOpts are the loopback connections' options: four reads and
// atomics in flight each way, a short RNR delay, MTU 1024.
var loopOpts = &uverbs.ConnectOptions{PathMTU: uverbs.MTU1024, MaxRdAtomic: 4, MaxDestRdAtomic: 4, MinRNRTimer: 1}

// connectRC brings two RC QPs of the device to RTS, each the other's
// peer, both at gid.
func connectRC(a, b *uverbs.QP, gid uverbs.GID) error {
	ea := uverbs.Endpoint{QPN: a.QPN(), PSN: 100, GID: gid}
	eb := uverbs.Endpoint{QPN: b.QPN(), PSN: 100, GID: gid}
	if err := a.ConnectRC(ea, eb, loopOpts); err != nil {
		return err
	}
	return b.ConnectRC(eb, ea, loopOpts)
}

// fixture is a context with a loopback RC pair whose sends complete on
// scq (with a completion channel when asked) and memory to write.
type fixture struct {
	ctx   *uverbs.Context
	done  func()
	pd    *uverbs.PD
	buf   *uverbs.Buffer
	mr    *uverbs.MR
	ch    *cq.Channel
	scq   *cq.CQ
	rcq   *cq.CQ
	a, b  *uverbs.QP
	gid   uverbs.GID
	close func()
}

func (e *env) fixture(uars string, cqe int, channel bool) (*fixture, error) {
	f := &fixture{}
	var closers []func()
	f.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*fixture, error) { f.close(); return nil, err }
	var err error
	if f.ctx, f.done, err = e.open(uars); err != nil {
		return nil, err
	}
	closers = append(closers, f.done)
	if err := e.findGID(f.ctx); err != nil {
		return fail(err)
	}
	g, err := f.ctx.QueryGID(1, e.gid)
	if err != nil {
		return fail(fmt.Errorf("GID %d: %w", e.gid, err))
	}
	f.gid = g.GID
	if f.pd, err = f.ctx.AllocPD(); err != nil {
		return fail(err)
	}
	closers = append(closers, func() { f.pd.Close() })
	if f.buf, err = uverbs.AllocBuffer(1 << 16); err != nil {
		return fail(err)
	}
	closers = append(closers, func() { f.buf.Close() })
	if f.mr, err = f.pd.RegMR(f.buf.Bytes(), allAccess); err != nil {
		return fail(err)
	}
	closers = append(closers, func() { f.mr.Close() })
	if channel {
		if f.ch, err = f.ctx.NewCompChannel(); err != nil {
			return fail(err)
		}
		closers = append(closers, func() { f.ch.Close() })
	}
	if f.scq, err = f.ctx.NewCQ(cq.Config{Size: cqe, Channel: f.ch}); err != nil {
		return fail(err)
	}
	closers = append(closers, func() { f.scq.Close() })
	if f.rcq, err = f.ctx.NewCQ(cq.Config{Size: 16}); err != nil {
		return fail(err)
	}
	closers = append(closers, func() { f.rcq.Close() })
	cfg := uverbs.QPConfig{Type: uverbs.RC, SendCQ: f.scq, RecvCQ: f.rcq,
		Cap: uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if f.a, err = f.pd.NewQP(cfg); err != nil {
		return fail(err)
	}
	closers = append(closers, func() { f.a.Close() })
	if f.b, err = f.pd.NewQP(cfg); err != nil {
		return fail(err)
	}
	closers = append(closers, func() { f.b.Close() })
	if err := connectRC(f.a, f.b, f.gid); err != nil {
		return fail(err)
	}
	return f, nil
}

// post posts one signaled 8-byte RDMA write from q into the buffer.
func (f *fixture) post(q *uverbs.QP, wrid uint64) error {
	sge, err := f.mr.SGE(0, 8)
	if err != nil {
		return err
	}
	_, err = q.PostSend([]uverbs.SendWR{{WRID: wrid, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{sge}, RemoteAddr: f.mr.Addr() + 4096, RKey: f.mr.RKey()}})
	return err
}

// write posts one signaled RDMA write from a.
func (f *fixture) write(wrid uint64) error { return f.post(f.a, wrid) }

// poll polls scq until n completions came (5 s at most), each a success.
func (f *fixture) poll(n int) ([]cq.WC, error) {
	out := make([]cq.WC, 0, n)
	buf := make([]cq.WC, n)
	deadline := time.Now().Add(5 * time.Second)
	for len(out) < n {
		k, err := f.scq.Poll(buf[:n-len(out)])
		if err != nil {
			return out, err
		}
		for _, w := range buf[:k] {
			if w.Status != cq.Success {
				return out, fmt.Errorf("completion %+v", w)
			}
		}
		out = append(out, buf[:k]...)
		if k == 0 && time.Now().After(deadline) {
			return out, fmt.Errorf("%d of %d completions in 5 s", len(out), n)
		}
	}
	return out, nil
}

// event arms scq, writes, waits for the event, acknowledges it and polls
// the completion, n times.
func (f *fixture) event(n int) error {
	for i := range n {
		if err := f.scq.ReqNotify(cq.NextCompletion); err != nil {
			return err
		}
		if err := f.write(uint64(i)); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := f.ch.Wait(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("event %d of %d: %w", i+1, n, err)
		}
		c.Ack(1)
		if c != f.scq {
			return fmt.Errorf("event %d names another CQ", i+1)
		}
		wcs, err := f.poll(1)
		if err != nil {
			return fmt.Errorf("after event %d: %w", i+1, err)
		}
		if wcs[0].WRID != uint64(i) {
			return fmt.Errorf("event %d: completion %+v", i+1, wcs[0])
		}
	}
	return nil
}
