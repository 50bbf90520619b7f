package rdmanet_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/rdmanet"
)

// The stress tests of issue #40: a long stream on one connection, 64
// connections streaming at once, a peer killed mid-stream, and the
// memory of idle connections.
//
// Issue #40 asks for a 1 GiB stream and 64 connections streaming at
// once. Under QEMU's TCG (the VM harness: no KVM) the stream moves a few
// MB/s, so the sizes are flags, each with a default that keeps its test
// to a few seconds in the 6.1/amd64 VM; the flags give the full sizes:
//
//	go test ./rdmanet/ -run TestStreamLong -rdmanet.stream=1GiB
//	go test ./rdmanet/ -run TestStream64 -rdmanet.stream64=16MiB
//
// The VM harness passes no flags to the test binaries, but environment
// variables, which set the defaults:
//
//	go run ./test/vm -vms 6.1/amd64 -pkg ./rdmanet/ -run TestStreamLong \
//		-env GOVERBS_RDMANET_STREAM=1GiB test
var (
	streamSize = sizeFlag("rdmanet.stream", "GOVERBS_RDMANET_STREAM", 64<<20,
		"bytes TestStreamLong streams on one connection (issue #40: 1GiB)")
	stream64Size = sizeFlag("rdmanet.stream64", "GOVERBS_RDMANET_STREAM64", 512<<10,
		"bytes TestStream64 streams each way on each of its 64 connections")
	sizeFlagErr error // a bad size in the environment, reported by the tests that use it
)

// byteSize is a flag's size in bytes: 1GiB, 64MiB, 512KiB or 4096.
type byteSize int64

func (s byteSize) String() string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if s > 0 && s%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", s>>u.shift, u.name)
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

func (s *byteSize) Set(v string) error {
	n, err := testutil.ParseSize(v)
	*s = byteSize(n)
	return err
}

// sizeFlag defines a size flag whose default the environment variable
// env overrides.
func sizeFlag(name, env string, def byteSize, usage string) *byteSize {
	s := new(byteSize)
	*s = def
	if v := os.Getenv(env); v != "" {
		if err := s.Set(v); err != nil {
			sizeFlagErr = fmt.Errorf("$%s: %w", env, err)
		}
	}
	flag.Var(s, name, usage+"; $"+env+" sets the default")
	return s
}

func checkSizeFlags(t *testing.T) {
	t.Helper()
	if sizeFlagErr != nil {
		t.Fatal(sizeFlagErr)
	}
}

// pattern is random bytes; a stream is slices of it at random offsets
// and of random lengths, so that a byte lost, doubled or out of place
// changes the stream's SHA-256, and the reader can name the first.
var pattern = func() []byte {
	b := make([]byte, 3<<20)
	rand.NewChaCha8([32]byte{'r', 'd', 'm', 'a', 'n', 'e', 't'}).Read(b)
	return b
}()

// randSize is a size from 1 B to 1 MiB, log-uniform in its magnitude so
// that small writes and reads come as often as large ones.
func randSize(r *rand.Rand) int { return 1 + r.IntN(1<<r.IntN(21)) }

// chunks is a stream of total bytes, seeded: the writer writes its
// chunks, the reader replays them to check what arrives.
type chunks struct {
	r    *rand.Rand
	left int64
}

func newChunks(seed uint64, total int64) *chunks {
	return &chunks{r: rand.New(rand.NewPCG(seed, 0x57e55)), left: total}
}

// next returns the next chunk, nil at the end.
func (g *chunks) next() []byte {
	if g.left == 0 {
		return nil
	}
	n := int(min(int64(randSize(g.r)), g.left))
	off := g.r.IntN(len(pattern) - n + 1)
	g.left -= int64(n)
	return pattern[off : off+n]
}

// writeStream writes the stream seed of total bytes to c in random
// sizes, then CloseWrite, and returns its SHA-256. progress counts the
// bytes written.
func writeStream(c net.Conn, seed uint64, total int64, progress *atomic.Int64) (sum [32]byte, err error) {
	h := sha256.New()
	g := newChunks(seed, total)
	for b := g.next(); b != nil; b = g.next() {
		h.Write(b)
		n, err := c.Write(b)
		progress.Add(int64(n))
		if err != nil {
			return sum, fmt.Errorf("write at byte %d of %d: %w", total-g.left-int64(len(b))+int64(n), total, err)
		}
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		return sum, fmt.Errorf("CloseWrite: %w", err)
	}
	h.Sum(sum[:0])
	return sum, nil
}

// readResult is what readStream saw.
type readResult struct {
	n     int64    // bytes read
	sum   [32]byte // their SHA-256
	bad   int64    // the offset of the first byte not the stream's, or -1
	reads int      // Read calls that returned bytes
	err   error    // the error that ended it, other than io.EOF
}

// readStream reads c to io.EOF in random sizes, hashing what arrives and
// comparing it with the stream seed of total bytes.
func readStream(c net.Conn, seed, readSeed uint64, total int64, progress *atomic.Int64) readResult {
	res := readResult{bad: -1}
	h := sha256.New()
	want := newChunks(seed, total)
	var cur []byte // what is left of the chunk the stream is in
	r := rand.New(rand.NewPCG(readSeed, 0x4ead))
	buf := make([]byte, 1<<20)
	for {
		k, err := c.Read(buf[:randSize(r)])
		got := buf[:k]
		h.Write(got)
		for len(got) > 0 && res.bad < 0 {
			if len(cur) == 0 {
				if cur = want.next(); cur == nil {
					res.bad = res.n // bytes past the stream's end
					break
				}
			}
			m := min(len(got), len(cur))
			if i := firstDiff(got[:m], cur[:m]); i >= 0 {
				res.bad = res.n + int64(i)
				break
			}
			got, cur, res.n = got[m:], cur[m:], res.n+int64(m)
		}
		if res.bad >= 0 {
			res.n += int64(len(got))
		}
		if k > 0 {
			res.reads++
		}
		progress.Add(int64(k))
		if err == io.EOF {
			break
		}
		if err != nil {
			res.err = fmt.Errorf("read at byte %d of %d: %w", res.n, total, err)
			break
		}
	}
	h.Sum(res.sum[:0])
	return res
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// check reports what is wrong with a stream of total bytes whose writer
// hashed sent and whose reader saw res.
func (res readResult) check(total int64, sent [32]byte) error {
	switch {
	case res.err != nil:
		return res.err
	case res.bad >= 0:
		return fmt.Errorf("%d bytes read of %d; the first byte not the stream's at offset %d", res.n, total, res.bad)
	case res.n != total:
		return fmt.Errorf("%d bytes read of %d", res.n, total)
	case res.sum != sent:
		return fmt.Errorf("%d bytes read, their SHA-256 %x, the writer's %x", res.n, res.sum, sent)
	}
	return nil
}

// goroutines is the stacks of every goroutine.
func goroutines() string {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}

func mbps(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

// One connection streams -rdmanet.stream bytes, one way, written in
// random sizes from 1 B to 1 MiB and read in random sizes: the bytes
// arrive all, once, in order (the reader compares each with the stream
// it replays), and the SHA-256 of what was written equals that of what
// was read. Issue #40 asks for 1 GiB: -rdmanet.stream=1GiB (or
// GOVERBS_RDMANET_STREAM=1GiB), which took 1m58s in the 6.1/amd64 VM
// (9.1 MB/s; 5 to 10 MB/s measured there, as busy as the host is): the
// default, 64 MiB, takes 7 to 13 s.
func TestStreamLong(t *testing.T) {
	requireCM(t)
	checkSizeFlags(t)
	total := int64(*streamSize)
	l := listen(t, nil)
	cli, srv := pair(t, l, nil)
	defer cli.Close()
	defer srv.Close()
	var progress atomic.Int64
	stop := testutil.Watchdog(t, "stream", &progress, time.Minute, func() { cli.Close(); srv.Close() })
	defer stop()
	start := time.Now()
	var sent [32]byte
	var werr error
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		var wrote atomic.Int64
		sent, werr = writeStream(cli, 1, total, &wrote)
	}()
	res := readStream(srv, 1, 2, total, &progress)
	took := time.Since(start)
	<-wdone
	if werr != nil {
		t.Error(werr)
	}
	if err := res.check(total, sent); err != nil {
		t.Error(err)
	}
	t.Logf("%v in %v: %.2f MB/s, %d Reads; 1 GiB would take %v (-rdmanet.stream=%v)",
		streamSize, took.Round(time.Millisecond), mbps(total, took), res.reads,
		time.Duration(float64(1<<30)/float64(total)*float64(took)).Round(time.Second), streamSize)
}

// 64 connections stream at once, both ways on each: -rdmanet.stream64
// bytes each way (default 512 KiB, four times round a default read ring:
// 64 MiB in all), in random write and read sizes, the SHA-256 of each of
// the 128 streams equal at both ends and every byte in its place.
func TestStream64(t *testing.T) {
	requireCM(t)
	checkSizeFlags(t)
	const conns = 64
	total := int64(*stream64Size)
	if testutil.Race && total > 256<<10 {
		// The race detector's run wants the 64 at once, not the volume:
		// at 2 MiB it took 98 s of make test's 30 minutes.
		total = 256 << 10
	}
	l := listen(t, nil)
	start := time.Now()
	var all []net.Conn
	defer func() {
		for _, c := range all {
			c.Close()
		}
	}()
	ends := make([][2]net.Conn, conns)
	for i := range ends {
		cli, srv := pair(t, l, nil)
		ends[i] = [2]net.Conn{cli, srv}
		all = append(all, cli, srv)
	}
	setup := time.Since(start)
	var progress atomic.Int64
	stop := testutil.Watchdog(t, "64 streams", &progress, time.Minute, func() {
		for _, c := range all {
			c.Close()
		}
	})
	defer stop()
	type stream struct {
		sent [32]byte
		werr error
		res  readResult
	}
	streams := make([]stream, 2*conns) // 2i: client to server on connection i; 2i+1: back
	var wg sync.WaitGroup
	start = time.Now()
	for i, e := range ends {
		for dir := range 2 {
			s, seed := &streams[2*i+dir], uint64(2*i+dir)
			w, r := e[dir], e[1-dir]
			wg.Add(2)
			go func() {
				defer wg.Done()
				s.sent, s.werr = writeStream(w, seed, total, new(atomic.Int64))
			}()
			go func() {
				defer wg.Done()
				s.res = readStream(r, seed, seed+1000, total, &progress)
			}()
		}
	}
	wg.Wait()
	took := time.Since(start)
	for i := range streams {
		s := &streams[i]
		if s.werr != nil {
			t.Errorf("connection %d, %s: %v", i/2, [2]string{"client to server", "server to client"}[i%2], s.werr)
		}
		if err := s.res.check(total, s.sent); err != nil {
			t.Errorf("connection %d, %s: %v", i/2, [2]string{"client to server", "server to client"}[i%2], err)
		}
	}
	t.Logf("%d connections made in %v; %v each way on each at once (%v in all) in %v: %.2f MB/s in all",
		conns, setup.Round(time.Millisecond), byteSize(total), byteSize(2*conns*total), took.Round(time.Millisecond),
		mbps(2*conns*total, took))
}

// roles are what this test binary plays in a process of its own
// (testutil.StartRole): "peer" is the peer TestPeerKilled kills and
// TestIdleConnectionMemory's many connections' client.
var roles = testutil.Roles{"peer": peerRole}

func TestMain(m *testing.M) {
	skipDeviceExamples() // before the role: on a host without a device, no roles run
	roles.Main(m)
}

// peerRole's args are its role, "listen" or "dial=ADDR", and what it does
// once connected: "stream" (read everything and write without end),
// "idle" (nothing) or "idle=N" (dial N connections, idle). It connects
// (listening, it prints "ADDR a.b.c.d:port" first), prints "CONNECTED",
// and streams or idles until it is killed.
func peerRole(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("peer: want a role and a mode, have %q", args)
	}
	time.AfterFunc(2*time.Minute, func() { // never outlive a parent that died
		fmt.Println("PEER TIMEOUT")
		os.Exit(3)
	})
	return runPeer(args[0], args[1])
}

func runPeer(role, mode string) error {
	if n, ok := strings.CutPrefix(mode, "idle="); ok {
		return dialIdle(strings.TrimPrefix(role, "dial="), n)
	}
	var c net.Conn
	switch addr, ok := strings.CutPrefix(role, "dial="); {
	case role == "listen":
		l, err := rdmanet.Listen("rdma", netip.AddrPortFrom(rxeIP, 0).String())
		if err != nil {
			return err
		}
		fmt.Printf("ADDR %s\n", l.Addr())
		if c, err = l.Accept(); err != nil {
			return err
		}
	case ok:
		var err error
		if c, err = (&rdmanet.Dialer{Timeout: 30 * time.Second}).DialContext(context.Background(), "rdma", addr); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	fmt.Println("CONNECTED")
	switch mode {
	case "idle":
		select {}
	case "stream":
		go io.Copy(io.Discard, c)
		g := newChunks(99, 1<<62)
		for {
			if _, err := c.Write(g.next()); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// dialIdle dials n connections to addr, 8 at a time, each with the
// smallest Config (2 read and 1 write slot of 4 KiB), prints
// "CONNECTED", and holds them until it is killed.
func dialIdle(addr, n string) error {
	count, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	d := &rdmanet.Dialer{Timeout: time.Minute, Config: rdmanet.Config{BufferSize: 4 << 10, ReadBuffers: 2, WriteBuffers: 1}}
	conns := make([]net.Conn, count)
	errs := make([]error, 8) // a worker's first error ends it
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < count && errs[w] == nil; i = int(next.Add(1)) - 1 {
				conns[i], errs[w] = d.DialContext(context.Background(), "rdma", addr)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Println("CONNECTED")
	select {}
}

// startPeer starts peerRole in a process of its own.
func startPeer(t *testing.T, role, mode string) *testutil.Proc {
	t.Helper()
	return testutil.StartRole(t, "peer", nil, role, mode)
}

// A peer process killed (SIGKILL) while connected: the survivor's Read
// and its Write return errors wrapping ECONNRESET, in milliseconds (the
// bound is 30 s; the log says how long each took), and once it closes
// the Conn (and the Listener) its goroutines, its fds and the kernel's
// objects of rxe0 (the killed process's among them) are what they were
// before. The survivor is the server, then the client, and at the kill:
//
//   - stream: both sides read and write, a Read and a Write waiting or
//     under way in the survivor;
//   - write-blocked: the peer reads nothing, so the survivor's Write
//     waits for credits with none of its messages in flight, and it does
//     not read (only its receives can flush); Read is called after;
//   - read-waiting: the peer writes nothing, the survivor's Read waits;
//     Write is called after.
func TestPeerKilled(t *testing.T) {
	requireCM(t)
	for _, server := range []bool{true, false} {
		for _, mode := range []string{"stream", "write-blocked", "read-waiting"} {
			name := map[bool]string{true: "survivor=server", false: "survivor=client"}[server] + "/" + mode
			t.Run(name, func(t *testing.T) { testPeerKilled(t, server, mode) })
		}
	}
}

func testPeerKilled(t *testing.T, server bool, mode string) {
	testutil.CheckFDLeak(t)
	baseG := runtime.NumGoroutine()
	baseRes := rdmatest.RXECounts(t)
	peerMode := "idle"
	if mode == "stream" {
		peerMode = "stream"
	}

	var c net.Conn
	var l net.Listener
	var p *testutil.Proc
	if server {
		var err error
		l, err = (&rdmanet.ListenConfig{}).Listen(t.Context(), "rdma", netip.AddrPortFrom(rxeIP, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		p = startPeer(t, "dial="+l.Addr().String(), peerMode)
		defer p.Kill()
		acc := make(chan error, 1)
		go func() {
			var err error
			c, err = l.Accept()
			acc <- err
		}()
		select {
		case err := <-acc:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			l.Close()
			<-acc
			t.Fatal("no connection from the peer in a minute")
		}
	} else {
		p = startPeer(t, "listen", peerMode)
		defer p.Kill()
		addr := p.Expect(t, "ADDR ", time.Minute)
		var err error
		if c, err = (&rdmanet.Dialer{Timeout: 30 * time.Second}).DialContext(t.Context(), "rdma", addr); err != nil {
			t.Fatal(err)
		}
	}
	defer c.Close()
	p.Expect(t, "CONNECTED", time.Minute)
	during := rdmatest.RXECounts(t)

	var read, wrote atomic.Int64
	type end struct {
		err error
		at  time.Time
	}
	rdone, wdone := make(chan end, 1), make(chan end, 1)
	reader := func() {
		buf := make([]byte, 256<<10)
		for {
			n, err := c.Read(buf)
			read.Add(int64(n))
			if err != nil {
				rdone <- end{err, time.Now()}
				return
			}
		}
	}
	writer := func() {
		g := newChunks(7, 1<<62)
		for {
			n, err := c.Write(g.next())
			wrote.Add(int64(n))
			if err != nil {
				wdone <- end{err, time.Now()}
				return
			}
		}
	}
	// Bring the survivor to the state to kill the peer in.
	deadline := time.Now().Add(time.Minute)
	switch mode {
	case "stream": // until each way has moved 2 MiB
		go reader()
		go writer()
		for read.Load() < 2<<20 || wrote.Load() < 2<<20 {
			if time.Now().After(deadline) {
				t.Fatalf("the stream moved %d bytes in and %d out in a minute", read.Load(), wrote.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
	case "write-blocked": // until the Write has waited half a second
		go writer()
		for last, since := int64(-1), time.Now(); ; time.Sleep(10 * time.Millisecond) {
			if w := wrote.Load(); w != last {
				last, since = w, time.Now()
			} else if time.Since(since) > 500*time.Millisecond && w > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Write to a peer that reads nothing is still under way after a minute: %d bytes", wrote.Load())
			}
		}
		select {
		case e := <-wdone:
			t.Fatalf("Write to a peer that reads nothing, alive: %v", e.err)
		default:
		}
	case "read-waiting":
		go reader()
		time.Sleep(500 * time.Millisecond)
		select {
		case e := <-rdone:
			t.Fatalf("Read from a peer that writes nothing, alive: %v", e.err)
		default:
		}
	}
	killed := time.Now()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	atKill := [2]int64{read.Load(), wrote.Load()}

	// Each of Read and Write returns an error within bound: the one
	// under way at the kill, then the other, called after it.
	const bound = 30 * time.Second
	waitEnd := func(ch chan end, op string) *end {
		select {
		case e := <-ch:
			return &e
		case <-time.After(bound):
			t.Errorf("%s still waiting %v after the peer's SIGKILL (%d bytes in, %d out since the kill); goroutines:\n%s",
				op, bound, read.Load()-atKill[0], wrote.Load()-atKill[1], goroutines())
			c.Close() // ends it, net.ErrClosed
			e := <-ch
			return &e
		}
	}
	var rend, wend *end
	switch mode {
	case "stream":
		rend, wend = waitEnd(rdone, "Read"), waitEnd(wdone, "Write")
	case "write-blocked":
		wend = waitEnd(wdone, "Write")
		go reader()
		rend = waitEnd(rdone, "Read")
	case "read-waiting":
		rend = waitEnd(rdone, "Read")
		go writer()
		wend = waitEnd(wdone, "Write")
	}
	for _, x := range []struct {
		op string
		e  *end
	}{{"Read", rend}, {"Write", wend}} {
		// Package rdmanet's doc: "When the peer disconnects or dies, ...
		// the next Read ... or Write returns an error wrapping
		// syscall.ECONNRESET."
		if !errors.Is(x.e.err, syscall.ECONNRESET) {
			t.Errorf("%s after the peer's SIGKILL: %v, want an error wrapping ECONNRESET", x.op, x.e.err)
		}
		t.Logf("%s returned %v after the SIGKILL: %v", x.op, x.e.at.Sub(killed).Round(time.Millisecond), x.e.err)
	}
	t.Logf("%d bytes in and %d out before the kill, %d and %d after it", atKill[0], atKill[1],
		read.Load()-atKill[0], wrote.Load()-atKill[1])
	if err := p.Kill(); err == nil {
		t.Errorf("the peer survived SIGKILL; its output:\n%s", p.Output())
	}
	closeStart := time.Now()
	if err := c.Close(); err != nil {
		t.Logf("Close: %v", err)
	}
	closeTook := time.Since(closeStart)
	if l != nil {
		if err := l.Close(); err != nil {
			t.Errorf("Listener.Close: %v", err)
		}
	}

	var g int
	if !testutil.WaitUntil(5*time.Second, func() bool { g = runtime.NumGoroutine(); return g <= baseG }) {
		t.Errorf("goroutine leak: %d before, %d after Close:\n%s", baseG, g, goroutines())
	}
	var after map[string]uint64
	since := time.Now()
	if !testutil.WaitUntil(30*time.Second, func() bool { after = rdmatest.RXECounts(t); return maps.Equal(baseRes, after) }) {
		t.Errorf("rxe0's objects: %v before, %v with the peer, %v 30 s after Close", baseRes, during, after)
	} else {
		t.Logf("Close took %v; rxe0's objects %v with the peer, back to %v %v after Close",
			closeTook.Round(time.Millisecond), during, after, time.Since(since).Round(time.Millisecond))
	}
	for _, k := range []string{"qp", "cq", "mr", "cm_id"} {
		if _, ok := baseRes[k]; ok && during[k] < baseRes[k]+2 {
			t.Errorf("%s count %d with the connection up, %d before: the counts miss its two ends", k, during[k], baseRes[k])
		}
	}
}

// memUse is what the process holds: resident and pinned memory, the Go
// heap, goroutines.
type memUse struct {
	rss, pin, heap int64
	goroutines     int
}

// measureMem measures the process, once the heap's garbage (earlier
// tests') has gone back to the kernel.
func measureMem(t *testing.T) memUse {
	t.Helper()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memUse{procStatus(t, "VmRSS"), procStatus(t, "VmPin"), int64(ms.HeapAlloc), runtime.NumGoroutine()}
}

// growth says how m grew from m0, per connection of conns.
func (m memUse) growth(m0 memUse, conns int) string {
	kib := func(a, b int64) float64 { return float64(b-a) / 1024 / float64(conns) }
	return fmt.Sprintf("RSS +%.1f KiB, VmPin +%.1f KiB, Go heap +%.1f KiB, goroutines +%.1f",
		kib(m0.rss, m.rss), kib(m0.pin, m.pin), kib(m0.heap, m.heap), float64(m.goroutines-m0.goroutines)/float64(conns))
}

// procStatus returns a field of /proc/self/status in bytes (VmRSS,
// VmPin: the kernel prints kB).
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("/proc/self/status: %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/self/status has no %s", field)
	return 0
}

// A server's idle connections, with the default Config, their clients
// in another process (peerRole): each registers 192 KiB, which the
// kernel pins (VmPin grows by exactly that), and the server's resident
// memory grows by less than 300 KiB a connection (the bound: 300
// MiB for 1,000). The log says what each costs: RSS, VmPin, the Go heap,
// goroutines. GOVERBS_RDMANET_IDLE sets how many (default 250; 1,000 is
// the figure, about 20 s under TCG). The process's one-time
// growth (heap arenas, the runtime's own structures) is shared among
// them, so too few make each look dearer than it is: 100 measured 297 to
// 316 KiB each where 1,000 measure 269 to 286.
func TestIdleServerMemory(t *testing.T) {
	requireCM(t)
	conns := 250
	if v := os.Getenv("GOVERBS_RDMANET_IDLE"); v != "" {
		var err error
		if conns, err = strconv.Atoi(v); err != nil || conns < 1 {
			t.Fatalf("GOVERBS_RDMANET_IDLE=%q: want a count", v)
		}
	}
	l := listen(t, nil)
	c0, s0 := pair(t, l, nil) // what is made once per process is not counted
	defer c0.Close()
	defer s0.Close()
	m0 := measureMem(t)

	start := time.Now()
	p := startPeer(t, "dial="+l.Addr().String(), fmt.Sprintf("idle=%d", conns))
	defer p.Kill()
	var all []net.Conn
	defer func() {
		for _, c := range all {
			c.Close()
		}
	}()
	for range conns {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, c)
	}
	p.Expect(t, "CONNECTED", time.Minute)
	setup := time.Since(start)
	time.Sleep(time.Second) // idle
	m1 := measureMem(t)
	t.Logf("%d idle server connections made in %v; per connection: %s; RSS %d MiB in all",
		conns, setup.Round(time.Millisecond), m1.growth(m0, conns), m1.rss>>20)
	if got, want := m1.pin-m0.pin, int64(conns*192<<10); got != want {
		t.Errorf("VmPin grew by %d bytes for %d connections, want %d (the default 192 KiB each)", got, conns, want)
	}
	// The race detector's shadow memory inflates RSS: its run checks
	// the pinned memory only.
	if per := (m1.rss - m0.rss) / int64(conns); per >= 300<<10 && !testutil.Race {
		t.Errorf("RSS grew by %d KiB a connection, want under 300 KiB (300 MiB for 1,000)", per>>10)
	}
}

// 100 idle connections cost what their Config says: each end registers
// (ReadBuffers + WriteBuffers) × BufferSize bytes, the default 192 KiB
// at the client and a smaller Config's 24 KiB at the server, which the
// kernel pins (VmPin grows by exactly that) and gives back at Close. The
// log reports the growth of RSS, of the Go heap and of goroutines per
// connection, which are not asserted.
func TestIdleConnsMemory(t *testing.T) {
	requireCM(t)
	const conns = 100
	srvCfg := rdmanet.Config{BufferSize: 4 << 10, ReadBuffers: 4, WriteBuffers: 2}
	const cliMem, srvMem = (32 + 16) * 4 << 10, (4 + 2) * 4 << 10
	l := listen(t, &rdmanet.ListenConfig{Config: srvCfg})
	// Make one connection first, so that what is made once per process
	// (the device's context and PD, the runtime's poller) is not counted.
	c0, s0 := pair(t, l, nil)
	defer c0.Close()
	defer s0.Close()

	m0 := measureMem(t)
	res0 := rdmatest.RXECounts(t)
	var all []net.Conn
	defer func() {
		for _, c := range all {
			c.Close()
		}
	}()
	start := time.Now()
	for range conns {
		cli, srv := pair(t, l, nil)
		all = append(all, cli, srv)
	}
	setup := time.Since(start)
	time.Sleep(time.Second) // idle
	m1 := measureMem(t)
	res1 := rdmatest.RXECounts(t)

	if got, want := m1.pin-m0.pin, int64(conns*(cliMem+srvMem)); got != want {
		t.Errorf("VmPin grew by %d bytes for %d connections, want %d: %d KiB a client end, %d KiB a server end",
			got, conns, want, cliMem>>10, srvMem>>10)
	}
	// Each end has a QP and a CQ, and two MRs: its read ring (remote
	// write) and its write buffers.
	for k, each := range map[string]int{"mr": 2, "qp": 1, "cq": 1} {
		if got := res1[k] - res0[k]; got != uint64(each*2*conns) {
			t.Errorf("rxe0's %s count grew by %d for %d connections (%d ends), want %d", k, got, conns, 2*conns, each*2*conns)
		}
	}
	t.Logf("%d idle connections (%d ends) made in %v; per connection (both ends, %d KiB registered): %s",
		conns, 2*conns, setup.Round(time.Millisecond), (cliMem+srvMem)>>10, m1.growth(m0, conns))
	t.Logf("RSS %d KiB before, %d KiB with the connections", m0.rss>>10, m1.rss>>10)

	for _, c := range all {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	all = nil
	var pin2 int64
	if !testutil.WaitUntil(10*time.Second, func() bool { pin2 = procStatus(t, "VmPin"); return pin2 == m0.pin }) {
		t.Errorf("VmPin %d KiB after closing the connections, %d KiB before them", pin2>>10, m0.pin>>10)
	}
	debug.FreeOSMemory()
	t.Logf("after Close: RSS %d KiB", procStatus(t, "VmRSS")>>10)
}

// The stream check itself, on net.Pipe and anywhere: a stream passes
// whole, and a byte lost, doubled or swapped is named at its offset.
func TestStreamCheck(t *testing.T) {
	const total = 3 << 20
	stream := func(alter func([]byte) []byte) readResult {
		a, b := net.Pipe()
		var sent [32]byte
		go func() {
			var all bytes.Buffer
			g := newChunks(5, total)
			for c := g.next(); c != nil; c = g.next() {
				all.Write(c)
			}
			sent = sha256.Sum256(all.Bytes())
			a.Write(alter(all.Bytes()))
			a.Close()
		}()
		res := readStream(b, 5, 6, total, new(atomic.Int64))
		if res.err == nil && res.sum != sent && res.bad < 0 && res.n == total { // the hash and the comparison disagree
			t.Errorf("SHA-256 differs, yet the bytes compare equal")
		}
		return res
	}
	if res := stream(func(b []byte) []byte { return b }); res.check(total, sha256.Sum256(streamBytes(5, total))) != nil {
		t.Errorf("the stream whole: %v", res.check(total, sha256.Sum256(streamBytes(5, total))))
	}
	for _, c := range []struct {
		name  string
		alter func([]byte) []byte
		bad   int64
	}{
		{"lost", func(b []byte) []byte { return append(b[:1000:1000], b[1001:]...) }, 1000},
		{"doubled", func(b []byte) []byte { return append(b[:2001:2001], b[2000:]...) }, 2001},
		{"swapped", func(b []byte) []byte { b[3000], b[3001] = b[3001], b[3000]; return b }, 3000},
		{"extra", func(b []byte) []byte { return append(b, 0) }, total},
	} {
		res := stream(c.alter)
		if res.bad != c.bad || res.check(total, sha256.Sum256(streamBytes(5, total))) == nil {
			t.Errorf("%s: first bad byte at %d, want %d; check: %v", c.name, res.bad, c.bad, res.check(total, sha256.Sum256(streamBytes(5, total))))
		}
	}
}

// streamBytes is the stream seed of total bytes, whole.
func streamBytes(seed uint64, total int64) []byte {
	var all []byte
	g := newChunks(seed, total)
	for c := g.next(); c != nil; c = g.next() {
		all = append(all, c...)
	}
	return all
}
