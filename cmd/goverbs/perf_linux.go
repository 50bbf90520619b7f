package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

func init() {
	register("perf", "send/write latency and bandwidth, reporting what perftest's ib_{send,write}_{lat,bw} report", func(args []string) int {
		return perf(os.Stdout, args)
	})
}

type perfConfig struct {
	test   string // send_lat, write_lat, send_bw, write_bw
	dev    string
	ibPort int
	gidx   int
	port   int
	size   int
	iters  int
	depth  int
	rx     int // receives posted ahead
	cqMod  int // bandwidth tests: one send in cqMod is signaled
	inline int // messages of up to this many bytes are sent inline
	server string
	prof   string // CPU profile file, or ""
	all    bool   // latency tests: print every sample, as perftest's -U
	warmup time.Duration
	cpu    cpuFlag // -cpu: the polling thread's CPU, if set
}

// perfPeer is what the two sides exchange over TCP, as one JSON line.
type perfPeer struct {
	QPN  uint32     `json:"qpn"`
	PSN  uint32     `json:"psn"`
	LID  uint16     `json:"lid"`
	GID  uverbs.GID `json:"gid"`
	RKey uint32     `json:"rkey"`
	Addr uint64     `json:"addr"`
	MTU  uverbs.MTU `json:"mtu"` // the port's active MTU
	Test string     `json:"test"`
	Size int        `json:"size"`
	N    int        `json:"iters"`
}

func perf(out io.Writer, args []string) int {
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	var c perfConfig
	fs.StringVar(&c.test, "t", "send_lat", "`test`: send_lat, write_lat, send_bw or write_bw")
	fs.StringVar(&c.dev, "d", "", "RDMA `device` (default: the first)")
	fs.IntVar(&c.ibPort, "i", 1, "device `port`")
	fs.IntVar(&c.gidx, "g", -1, "GID `index` (default: the first RoCE v2 GID)")
	fs.IntVar(&c.port, "p", 18516, "TCP `port` of the exchange")
	fs.IntVar(&c.size, "s", 2, "message `size` in bytes")
	fs.IntVar(&c.iters, "n", 1000, "`iterations`")
	fs.IntVar(&c.depth, "q", 128, "send queue `depth` for the bandwidth tests")
	fs.IntVar(&c.rx, "r", 512, "receives to post ahead (`depth` of the receive queue), as perftest's --rx-depth")
	fs.IntVar(&c.cqMod, "Q", 100, "bandwidth tests: signal one send in `N` (and the last), as perftest's --cq-mod; left unset, messages over 8192 bytes signal every send, as perftest's do")
	fs.IntVar(&c.inline, "I", -1, "send messages of up to `N` bytes inline (IBV_SEND_INLINE), as perftest's --inline_size; -1: perftest's default for the device, which inlines only on devices it knows: on mlx5 (ConnectX-4 and later) 236 bytes for send_lat and 220 for write_lat, else 0 (the bandwidth tests, and rxe)")
	fs.StringVar(&c.prof, "cpuprofile", "", "write a CPU profile (pprof) of the run to `file`")
	fs.DurationVar(&c.warmup, "warmup", 0, "spin this `long` after the sides meet, before measuring (0: not at all)")
	fs.Var(&c.cpu, "cpu", cpuUsage)
	fs.BoolVar(&c.all, "U", false, "latency tests: print every sample in µs, in order, before the summary (perftest's --report-unsorted)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: goverbs perf [flags]         run the server side")
		fmt.Fprintln(fs.Output(), "       goverbs perf [flags] HOST    run the client side against HOST")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return 2
	}
	c.server = fs.Arg(0)
	switch c.test {
	case "send_lat", "write_lat", "send_bw", "write_bw":
	default:
		fs.Usage()
		return 2
	}
	if c.size < 1 || c.iters < 1 || c.depth < 1 || c.rx < 1 || c.cqMod < 1 || c.inline < -1 || c.port < 1 || c.port > 65535 {
		fs.Usage()
		return 2
	}
	// perftest signals every send of a message over 8 KiB unless -Q is
	// given (its force_dependecies): its rate counts cqMod messages a
	// completion, and so many in flight would skew it.
	cqModSet := false
	fs.Visit(func(f *flag.Flag) { cqModSet = cqModSet || f.Name == "Q" })
	if c.size > 8192 && !cqModSet {
		c.cqMod = 1
	}
	if c.test == "write_lat" {
		// The receiver watches the last 4-byte word of its buffer.
		c.size = max(4, (c.size+3)&^3)
	}
	if c.prof != "" {
		f, err := os.Create(c.prof)
		if err != nil {
			return fail("perf: %v", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail("perf: cpu profile: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	if err := runPerf(out, &c); err != nil {
		return fail("perf %s: %v", c.test, err)
	}
	return 0
}

// perfSide is one side's resources.
type perfSide struct {
	dev *uverbs.Context
	pd  *uverbs.PD
	buf *uverbs.Buffer
	mr  *uverbs.MR
	// sendSGE is [0,size) of mr, recvSGE [size,2·size).
	sendSGE, recvSGE uverbs.SGE
	scq              *cq.CQ
	rcq              *cq.CQ
	qp               *uverbs.QP
	wcs              []cq.WC
	size             int
	// inline is SendInline when the messages are sent inline, else 0.
	inline uverbs.SendFlags
	// recvLeft counts the receives still to post after those posted
	// ahead: once the run's receives are all posted, a consumed one is
	// not replaced, as in perftest.
	recvLeft int
	// One work request of each kind, built once: posting allocates nothing.
	sendWR []uverbs.SendWR
	recvWR []uverbs.RecvWR
}

func (s *perfSide) close() {
	if s.qp != nil {
		s.qp.Close()
	}
	for _, q := range []*cq.CQ{s.scq, s.rcq} {
		if q != nil {
			q.Close()
		}
	}
	if s.mr != nil {
		s.mr.Close()
	}
	if s.buf != nil {
		s.buf.Close()
	}
	if s.pd != nil {
		s.pd.Close()
	}
	if s.dev != nil {
		s.dev.Close()
	}
}

// defaultInline is perftest's inline size for a latency or bandwidth test
// on a device of the given driver (enum rdma_driver_id) when its
// --inline_size is not given: perftest inlines only on devices it
// recognises, and of those goverbs drives mlx5's (ConnectX-4 and later):
// 236 bytes for RC send_lat, 220 for write_lat, none for the bandwidth
// tests. rxe is not one of them.
func defaultInline(driver uint32, test string) int {
	if driver != uapi.RDMA_DRIVER_MLX5 {
		return 0
	}
	switch test {
	case "send_lat":
		return 236
	case "write_lat":
		return 220
	}
	return 0
}

func runPerf(out io.Writer, c *perfConfig) error {
	onePoller()
	unpin, err := c.cpu.pin()
	if err != nil {
		return err
	}
	defer unpin()
	// perftest polls up to 16 completions a call (CTX_POLL_BATCH) where it
	// takes more than one.
	s := &perfSide{size: c.size, wcs: make([]cq.WC, 16)}
	defer s.close()
	s.dev, err = openDevice(c.dev)
	if err != nil {
		return err
	}
	if c.inline < 0 {
		c.inline = defaultInline(s.dev.Device().DriverID, c.test)
	}
	if c.size <= c.inline {
		s.inline = uverbs.SendInline
	}
	if s.pd, err = s.dev.AllocPD(); err != nil {
		return err
	}
	// Two halves: [0,size) is what this side sends from, [size,2·size) is
	// where the peer's sends and writes land.
	if s.buf, err = uverbs.AllocBuffer(2 * c.size); err != nil {
		return err
	}
	if s.mr, err = s.pd.RegMR(s.buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite); err != nil {
		return err
	}
	if s.sendSGE, err = s.mr.SGE(0, s.size); err != nil {
		return err
	}
	if s.recvSGE, err = s.mr.SGE(s.size, s.size); err != nil {
		return err
	}
	s.recvWR = []uverbs.RecvWR{{SGL: []uverbs.SGE{s.recvSGE}}}
	s.sendWR = []uverbs.SendWR{{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{s.sendSGE}}}
	depth, rx := max(c.depth, 2), max(c.rx, 2)
	if s.scq, err = s.dev.NewCQ(cq.Config{Size: 2 * depth}); err != nil {
		return err
	}
	if s.rcq, err = s.dev.NewCQ(cq.Config{Size: 2 * rx}); err != nil {
		return err
	}
	if s.qp, err = s.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: s.scq, RecvCQ: s.rcq,
		Cap: uverbs.QPCap{MaxSendWR: uint32(depth), MaxRecvWR: uint32(rx), MaxSendSGE: 1, MaxRecvSGE: 1,
			MaxInlineData: uint32(c.inline)}}); err != nil {
		return err
	}
	port, err := s.dev.QueryPort(c.ibPort)
	if err != nil {
		return err
	}
	var gid uverbs.GIDEntry
	if c.gidx >= 0 {
		if gid, err = s.dev.QueryGID(c.ibPort, c.gidx); err != nil {
			return fmt.Errorf("GID index %d: %w", c.gidx, err)
		}
	} else if gid, err = s.dev.FindGID(c.ibPort, uverbs.GIDTypeRoCEv2, netip.Addr{}); err != nil {
		return err
	}
	me := perfPeer{QPN: s.qp.QPN(), PSN: rand.Uint32() & 0xffffff, LID: port.LID, GID: gid.GID,
		RKey: s.mr.RKey(), Addr: s.mr.Addr() + uint64(c.size), MTU: port.ActiveMTU, Test: c.test, Size: c.size, N: c.iters}
	conn, peer, err := perfExchange(c, me)
	if err != nil {
		return err
	}
	defer conn.Close()
	ep := func(p perfPeer) uverbs.Endpoint {
		return uverbs.Endpoint{LID: p.LID, QPN: p.QPN, PSN: p.PSN, GID: p.GID, MTU: p.MTU}
	}
	// The path MTU is the smaller of the two ports' active MTUs, as
	// perftest takes it (1024 on rxe over a 1500-byte netdev).
	if err := s.qp.ConnectRC(ep(me), ep(peer), &uverbs.ConnectOptions{Port: uint8(c.ibPort),
		GIDIndex: gid.Index, GIDType: gid.Type}); err != nil {
		return err
	}
	// Receives are posted ahead where perftest posts them: on both sides
	// of send_lat and on the server of send_bw, no more than the run takes.
	if c.test == "send_lat" || c.test == "send_bw" && c.server == "" {
		ahead := min(rx, c.iters)
		s.recvLeft = c.iters - ahead
		for i := 0; i < ahead; i++ {
			if err := s.postRecv(); err != nil {
				return err
			}
		}
	}
	// Both sides are at RTS before either sends.
	if err := perfSync(conn); err != nil {
		return err
	}
	warmUp(c.warmup)
	client := c.server != ""
	switch c.test {
	case "send_lat":
		lat, err := s.sendLat(client, c.iters)
		if err != nil {
			return err
		}
		printLat(out, c, lat, client)
	case "write_lat":
		lat, err := s.writeLat(client, c.iters, peer)
		if err != nil {
			return err
		}
		printLat(out, c, lat, client)
	case "send_bw", "write_bw":
		if !client {
			if c.test == "send_bw" {
				if err := s.recvN(c.iters); err != nil {
					return err
				}
			}
			return perfSync(conn) // the client is done when it says so
		}
		d, peak, err := s.bw(c.test == "write_bw", c.iters, depth, c.cqMod, peer)
		if err != nil {
			return err
		}
		if err := perfSync(conn); err != nil {
			return err
		}
		printBW(out, c, d, peak)
	}
	return nil
}

func (s *perfSide) postRecv() error {
	_, err := s.qp.PostRecv(s.recvWR)
	return err
}

// repost replaces a consumed receive while the run still needs one.
func (s *perfSide) repost() error {
	if s.recvLeft == 0 {
		return nil
	}
	s.recvLeft--
	return s.postRecv()
}

// pollOne spins until q yields a completion and checks it.
func (s *perfSide) pollOne(q *cq.CQ) error {
	for {
		n, err := q.Poll(s.wcs[:1])
		if err != nil {
			return err
		}
		if n == 1 {
			if s.wcs[0].Status != cq.Success {
				return fmt.Errorf("completion failed: %v", s.wcs[0].Status)
			}
			return nil
		}
	}
}

// send posts one signaled send: the latency tests signal every one.
func (s *perfSide) send() error {
	s.sendWR[0].Flags = uverbs.SendSignaled | s.inline
	_, err := s.qp.PostSend(s.sendWR)
	return err
}

// clock samples time for the latency tests as perftest does: one
// reading of the CPU's counter per iteration (cycles: RDTSC on amd64,
// CNTVCT_EL0 on arm64, as perftest's get_cycles), and the count between
// the starts of two iterations, halved, is one sample. The counts become
// time at the end, at the rate the monotonic clock gives the counter over
// the run (perftest divides by the CPU's MHz). A clock reading in the
// loop would be a vDSO call through the runtime's switch to the system
// stack, about 150 instructions against the counter's few (counted in
// the VM under -qemuicount), made while the peer waits for the next
// message: the tool's cost, which the samples would count as goverbs'.
type clock struct {
	t0   time.Time
	c0   uint64
	last uint64
	lat  []uint64 // counts, halved
}

func newClock(n int) *clock {
	c := &clock{t0: time.Now(), lat: make([]uint64, 0, n)}
	c.c0 = cycles()
	c.last = c.c0
	return c
}

// tick ends one iteration (and starts the next).
func (c *clock) tick() {
	now := cycles()
	c.lat = append(c.lat, (now-c.last)/2)
	c.last = now
}

// samples returns the samples as durations.
func (c *clock) samples() []time.Duration {
	return countsToDurations(c.lat, time.Since(c.t0), cycles()-c.c0)
}

// countsToDurations turns counter counts into durations, given that
// counts of the counter took d.
func countsToDurations(lat []uint64, d time.Duration, counts uint64) []time.Duration {
	out := make([]time.Duration, len(lat))
	if counts == 0 {
		return out
	}
	per := float64(d) / float64(counts)
	for i, v := range lat {
		out[i] = time.Duration(math.Round(float64(v) * per))
	}
	return out
}

// sendLat: the client sends, the server answers; one round trip, halved,
// is one sample, as ib_send_lat reports. Each side goes through
// perftest's steps in its order: the client sends and waits for that
// send's completion, then for the answer; the server waits for the
// message, reposts the receive, answers and waits for the answer's
// completion.
func (s *perfSide) sendLat(client bool, n int) ([]time.Duration, error) {
	sendDone := func() error {
		if err := s.send(); err != nil {
			return err
		}
		return s.pollOne(s.scq)
	}
	clk := newClock(n)
	for i := 0; i < n; i++ {
		if client {
			if err := sendDone(); err != nil {
				return nil, err
			}
		}
		if err := s.pollOne(s.rcq); err != nil {
			return nil, err
		}
		if err := s.repost(); err != nil {
			return nil, err
		}
		if client {
			clk.tick()
		} else if err := sendDone(); err != nil {
			return nil, err
		}
	}
	return clk.samples(), nil
}

// writeLat: each side RDMA-writes the iteration number into the last
// word of the peer's buffer and watches its own, as ib_write_lat does.
func (s *perfSide) writeLat(client bool, n int, peer perfPeer) ([]time.Duration, error) {
	mem := s.buf.Bytes()
	// Aligned: AllocBuffer is page-aligned and write_lat's size a multiple of 4.
	word := (*uint32)(unsafe.Pointer(&mem[2*s.size-4]))
	src := mem[:s.size]
	wr := []uverbs.SendWR{{Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled | s.inline,
		SGL: []uverbs.SGE{s.sendSGE}, RemoteAddr: peer.Addr, RKey: peer.RKey}}
	write := func(i uint32) error {
		binary32(src[s.size-4:], i)
		_, err := s.qp.PostSend(wr)
		if err != nil {
			return err
		}
		return s.pollOne(s.scq)
	}
	wait := func(i uint32) {
		for atomic.LoadUint32(word) != i {
		}
	}
	clk := newClock(n)
	for i := uint32(1); i <= uint32(n); i++ {
		if client {
			if err := write(i); err != nil {
				return nil, err
			}
			wait(i)
			clk.tick()
		} else {
			wait(i)
			if err := write(i); err != nil {
				return nil, err
			}
		}
	}
	return clk.samples(), nil
}

func binary32(b []byte, v uint32) {
	*(*uint32)(unsafe.Pointer(&b[0])) = v // host order: the peer reads it as a host word too
}

// recvN takes n receives, reposting each while the run needs more.
func (s *perfSide) recvN(n int) error {
	for got := 0; got < n; {
		k, err := s.rcq.Poll(s.wcs)
		if err != nil {
			return err
		}
		for _, w := range s.wcs[:k] {
			if w.Status != cq.Success {
				return fmt.Errorf("receive failed: %v", w.Status)
			}
			if err := s.repost(); err != nil {
				return err
			}
		}
		got += k
	}
	return nil
}

// bw streams n sends or writes with up to depth in flight and returns the
// time it took and the peak rate in messages a second. As perftest does,
// it signals one request in cqMod (and the last), and each completion
// accounts for the cqMod requests up to it; and, as perftest, it reads
// the CPU's counter as each request is posted and as each completion is
// taken, for the peak (peakRate). Over maxPeakIters requests it reports
// no peak (0), as perftest.
func (s *perfSide) bw(write bool, n, depth, cqMod int, peer perfPeer) (time.Duration, float64, error) {
	cqMod = min(cqMod, depth) // else the window could close with nothing signaled
	wr := []uverbs.SendWR{{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{s.sendSGE}}}
	if write {
		wr[0].Opcode, wr[0].RemoteAddr, wr[0].RKey = uverbs.WRRDMAWrite, peer.Addr, peer.RKey
	}
	peak := n <= maxPeakIters
	var posted, completed []uint64
	if peak {
		posted, completed = make([]uint64, n), make([]uint64, n)
	}
	np, done := 0, 0
	start, c0 := time.Now(), cycles()
	for done < n {
		for np < n && np-done < depth {
			wr[0].Flags = s.inline
			if (np+1)%cqMod == 0 || np == n-1 {
				wr[0].Flags |= uverbs.SendSignaled
			}
			if peak {
				posted[np] = cycles()
			}
			if _, err := s.qp.PostSend(wr); err != nil {
				return 0, 0, err
			}
			np++
		}
		k, err := s.scq.Poll(s.wcs)
		if err != nil {
			return 0, 0, err
		}
		for _, w := range s.wcs[:k] {
			if w.Status != cq.Success {
				return 0, 0, fmt.Errorf("completion failed: %v", w.Status)
			}
			done = min(done+cqMod, n)
			if peak {
				completed[done-1] = cycles()
			}
		}
	}
	d, counts := time.Since(start), cycles()-c0
	if !peak || counts == 0 {
		return d, 0, nil
	}
	best := peakCounts(posted, completed, cqMod)
	return d, float64(counts) / (d.Seconds() * float64(best)), nil
}

// maxPeakIters is perftest's bound: over 20,000 iterations it does not
// compute the peak, whose search takes time of the square of them.
const maxPeakIters = 20000

// peakCounts returns the fewest counter counts a message took over any
// run of messages i to j, from the post of i to the completion of j (j a
// signaled request, one in cqMod or the last): perftest's peak.
func peakCounts(posted, completed []uint64, cqMod int) uint64 {
	n := len(posted)
	best := (completed[n-1] - posted[0]) / uint64(n) // the whole run's, which i = 0, j = n-1 tries too
	try := func(i, j int) {
		if t := (completed[j] - posted[i]) / uint64(j-i+1); t < best {
			best = t
		}
	}
	for i := 0; i < n; i++ {
		for j := (i+1+cqMod-1)/cqMod*cqMod - 1; j < n; j += cqMod {
			try(i, j)
		}
		if n%cqMod != 0 {
			try(i, n-1)
		}
	}
	return max(best, 1)
}

func printLat(out io.Writer, c *perfConfig, lat []time.Duration, client bool) {
	if !client {
		fmt.Fprintf(out, " %s server: %d iterations of %d bytes done\n", c.test, c.iters, c.size)
		return
	}
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	if c.all {
		fmt.Fprintf(out, " #, %s[usec]\n", c.test)
		for i, d := range lat {
			fmt.Fprintf(out, " %d, %.2f\n", i, us(d))
		}
	}
	slices.Sort(lat)
	var sum, sq float64
	for _, d := range lat {
		sum += us(d)
	}
	avg := sum / float64(len(lat))
	for _, d := range lat {
		sq += (us(d) - avg) * (us(d) - avg)
	}
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(math.Ceil(p*float64(len(lat))))-1)] }
	fmt.Fprintf(out, " %-8s %-12s %-12s %-12s %-16s %-12s %-14s %-22s %s\n", "#bytes", "#iterations",
		"t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]", "99% percentile[usec]", "99.9% percentile[usec]")
	fmt.Fprintf(out, " %-8d %-12d %-12.2f %-12.2f %-16.2f %-12.2f %-14.2f %-22.2f %.2f\n", c.size, len(lat),
		us(lat[0]), us(lat[len(lat)-1]), us(lat[len(lat)/2]), avg, math.Sqrt(sq/float64(len(lat))), us(pct(0.99)), us(pct(0.999)))
}

func printBW(out io.Writer, c *perfConfig, d time.Duration, peakRate float64) {
	const mb = 1 << 20 // perftest's MB
	avg := float64(c.iters) * float64(c.size) / d.Seconds() / mb
	fmt.Fprintf(out, " %-10s %-14s %-18s %-20s %s\n", "#bytes", "#iterations", "BW peak[MB/sec]", "BW average[MB/sec]", "MsgRate[Mpps]")
	fmt.Fprintf(out, " %-10d %-14d %-18.2f %-20.2f %.6f\n", c.size, c.iters, peakRate*float64(c.size)/mb, avg,
		float64(c.iters)/d.Seconds()/1e6)
}

// perfExchange swaps the two sides' addresses over TCP, checking that
// they run the same test.
func perfExchange(c *perfConfig, me perfPeer) (net.Conn, perfPeer, error) {
	var conn net.Conn
	var err error
	if c.server != "" {
		deadline := time.Now().Add(10 * time.Second)
		for {
			conn, err = net.Dial("tcp", net.JoinHostPort(c.server, strconv.Itoa(c.port)))
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	} else {
		var ln net.Listener
		if ln, err = net.Listen("tcp", ":"+strconv.Itoa(c.port)); err == nil {
			conn, err = ln.Accept()
			ln.Close()
		}
	}
	if err != nil {
		return nil, perfPeer{}, fmt.Errorf("exchange: %w", err)
	}
	if err := json.NewEncoder(conn).Encode(me); err != nil {
		conn.Close()
		return nil, perfPeer{}, fmt.Errorf("exchange: %w", err)
	}
	line, err := readLine(conn)
	if err != nil {
		conn.Close()
		return nil, perfPeer{}, fmt.Errorf("exchange: %w", err)
	}
	peer, err := parsePeer(line)
	if err != nil {
		conn.Close()
		return nil, perfPeer{}, fmt.Errorf("exchange: %w", err)
	}
	if peer.Test != c.test || peer.Size != c.size || peer.N != c.iters {
		conn.Close()
		return nil, perfPeer{}, fmt.Errorf("the peer runs %s with %d bytes × %d, this side %s with %d × %d",
			peer.Test, peer.Size, peer.N, c.test, c.size, c.iters)
	}
	return conn, peer, nil
}

// parsePeer decodes the peer's JSON line, refusing a QPN or PSN wider
// than the 24 bits the wire carries.
func parsePeer(line []byte) (perfPeer, error) {
	var peer perfPeer
	if err := json.Unmarshal(line, &peer); err != nil {
		return perfPeer{}, err
	}
	if peer.QPN > 0xffffff || peer.PSN > 0xffffff {
		return perfPeer{}, fmt.Errorf("peer QPN %#x or PSN %#x is wider than 24 bits", peer.QPN, peer.PSN)
	}
	return peer, nil
}

// readLine reads up to a newline a byte at a time: a buffered reader
// could swallow the sync byte that follows.
func readLine(r io.Reader) ([]byte, error) {
	var line []byte
	var b [1]byte
	for len(line) < 4096 {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		if b[0] == '\n' {
			return line, nil
		}
		line = append(line, b[0])
	}
	return nil, errors.New("line too long")
}

// perfSync is a barrier: each side writes one byte and reads the other's.
func perfSync(conn net.Conn) error {
	if _, err := conn.Write([]byte{1}); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return nil
}
