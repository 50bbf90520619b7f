package rdmanet_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/rdmanet"
	"github.com/goverbs/goverbs/uverbs"
)

// One-sided operations, in the VM on rxe0. Both ends of a connection are
// in the test's process, so a test checks the peer's memory directly.

// rdmaPair is pair, as *rdmanet.Conns.
func rdmaPair(t *testing.T, cfg rdmanet.Config) (cli, srv *rdmanet.Conn) {
	t.Helper()
	l := listen(t, &rdmanet.ListenConfig{Config: cfg})
	c, s := pair(t, l, &rdmanet.Dialer{Config: cfg})
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*rdmanet.Conn), s.(*rdmanet.Conn)
}

// allocRegion registers n bytes of uverbs.AllocBuffer on c, filled with
// random bytes; the test's end closes both.
func allocRegion(t *testing.T, c *rdmanet.Conn, n int, seed uint64) *rdmanet.Region {
	t.Helper()
	buf, err := uverbs.AllocBuffer(n)
	if err != nil {
		t.Fatal(err)
	}
	fillRandom(buf.Bytes(), seed)
	r, err := c.Register(buf.Bytes())
	if err != nil {
		buf.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close()
		if err := buf.Close(); err != nil {
			t.Errorf("the Region's buffer: %v", err)
		}
	})
	return r
}

func fillRandom(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 3))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// sendToken and recvToken carry a token over the stream in its text
// form, as an application would: a length byte, then the text.
func sendToken(t *testing.T, c net.Conn, tok rdmanet.Token) {
	t.Helper()
	s := tok.String()
	if _, err := c.Write(append([]byte{byte(len(s))}, s...)); err != nil {
		t.Fatal(err)
	}
}

func recvToken(t *testing.T, c net.Conn) rdmanet.Token {
	t.Helper()
	var n [1]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		t.Fatal(err)
	}
	s := make([]byte, n[0])
	if _, err := io.ReadFull(c, s); err != nil {
		t.Fatal(err)
	}
	tok, err := rdmanet.ParseToken(string(s))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// ReadAt and WriteAt at a region's edges and across it, into and out of
// a local Region (no copy) and plain Go memory (bounced, in several
// operations when longer than BufferSize), move exactly the bytes asked
// for: the peer's bytes outside the range, and outside the region, stay.
func TestOneSidedEdges(t *testing.T) {
	requireCM(t)
	const bs = 4096
	cli, srv := rdmaPair(t, rdmanet.Config{BufferSize: bs})

	// The server's regions: AllocBuffer memory of no whole number of
	// pages, and a Go-heap slice at an odd offset between guard bytes.
	a := allocRegion(t, srv, 3*bs+100, 1)
	heap := make([]byte, 5000)
	fillRandom(heap, 2)
	b, err := srv.Register(heap[3 : 3+4001])
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The client's local Region, for the zero-copy cases.
	local := allocRegion(t, cli, 4*bs, 3).Bytes()

	for _, r := range []*rdmanet.Region{a, b} {
		sendToken(t, srv, r.Token())
		tok := recvToken(t, cli)
		if tok != r.Token() {
			t.Fatalf("token %v arrived as %v", r.Token(), tok)
		}
		mem, size := r.Bytes(), int(tok.Len)
		var cases [][2]int // offset, length
		for _, n := range []int{1, 7, bs - 1, bs, bs + 1, 2*bs + 3, size} {
			if n <= size {
				cases = append(cases, [2]int{0, n}, [2]int{size - n, n}, [2]int{(size - n) / 2, n})
			}
		}
		cases = append(cases, [2]int{size, 0}, [2]int{0, 0})
		for _, tc := range cases {
			off, n := tc[0], tc[1]
			for _, zeroCopy := range []bool{false, true} {
				name := fmt.Sprintf("%d bytes at %d of %d, zero-copy %t", n, off, size, zeroCopy)
				p := make([]byte, n)
				if zeroCopy {
					p = local[1 : 1+n]
				}
				clear(p)
				if k, err := cli.ReadAt(tok, int64(off), p); k != n || err != nil {
					t.Fatalf("ReadAt, %s: %d, %v", name, k, err)
				}
				if !bytes.Equal(p, mem[off:off+n]) {
					t.Fatalf("ReadAt, %s: the bytes differ", name)
				}
				before := bytes.Clone(heap)
				beforeA := bytes.Clone(a.Bytes())
				fillRandom(p, uint64(off*31+n))
				if k, err := cli.WriteAt(tok, int64(off), p); k != n || err != nil {
					t.Fatalf("WriteAt, %s: %d, %v", name, k, err)
				}
				want := bytes.Clone(mem)
				copy(want[off:], p)
				if !bytes.Equal(mem, want) {
					t.Fatalf("WriteAt, %s: the region is not what was written", name)
				}
				if r == b && (heap[2] != before[2] || heap[3+4001] != before[3+4001]) {
					t.Fatalf("WriteAt, %s: bytes around the region changed", name)
				}
				if r == b && !bytes.Equal(a.Bytes(), beforeA) {
					t.Fatalf("WriteAt, %s: another region changed", name)
				}
			}
		}
	}

	// The other way: the server reads the client's region.
	lr := allocRegion(t, cli, 100, 4)
	got := make([]byte, 100)
	if _, err := srv.ReadAt(lr.Token(), 0, got); err != nil || !bytes.Equal(got, lr.Bytes()) {
		t.Fatalf("the server's ReadAt: %v, equal %t", err, bytes.Equal(got, lr.Bytes()))
	}

	// The stream goes on beside them.
	if _, err := cli.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(srv, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
}

// A range outside the token fails with EINVAL before anything is posted:
// the connection goes on working.
func TestOneSidedOutOfBounds(t *testing.T) {
	requireCM(t)
	cli, srv := rdmaPair(t, rdmanet.Config{})
	r := allocRegion(t, srv, 1000, 1)
	tok := r.Token()
	for _, tc := range []struct {
		tok rdmanet.Token
		off int64
		n   int
	}{
		{tok, -1, 1},
		{tok, -1, 0},
		{tok, 1001, 0},
		{tok, 1000, 1},
		{tok, 999, 2},
		{tok, 0, 1001},
		{tok, math.MaxInt64, 1},
		{tok, math.MinInt64, 1},
		{rdmanet.Token{Addr: math.MaxUint64, Len: 2, RKey: tok.RKey}, 0, 1},
	} {
		p := make([]byte, tc.n)
		for _, write := range []bool{false, true} {
			var k int
			var err error
			if write {
				k, err = cli.WriteAt(tc.tok, tc.off, p)
			} else {
				k, err = cli.ReadAt(tc.tok, tc.off, p)
			}
			if k != 0 || !errors.Is(err, syscall.EINVAL) {
				t.Errorf("%d bytes at %d of %v (write %t): %d, %v; want EINVAL", tc.n, tc.off, tc.tok, write, k, err)
			}
		}
	}
	p := make([]byte, 1000)
	if _, err := cli.ReadAt(tok, 0, p); err != nil || !bytes.Equal(p, r.Bytes()) {
		t.Fatalf("ReadAt in bounds after them: %v", err)
	}
	if _, err := cli.WriteAt(tok, 999, []byte{1}); err != nil || r.Bytes()[999] != 1 {
		t.Fatalf("WriteAt in bounds after them: %v", err)
	}
}

// A token the peer does not grant, its region closed or its key wrong,
// fails cleanly: the operation returns an error wrapping
// ErrRemoteAccess, the broken connection's later calls fail with it
// rather than wait, and the peer's Read ends with ECONNRESET (its QP
// broke too) without waiting for a Close.
func TestOneSidedBadToken(t *testing.T) {
	requireCM(t)
	for _, tc := range []struct {
		name string
		bad  func(t *testing.T, r *rdmanet.Region) rdmanet.Token
	}{
		{"closed region", func(t *testing.T, r *rdmanet.Region) rdmanet.Token {
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("second Region.Close: %v, want net.ErrClosed", err)
			}
			return r.Token()
		}},
		{"wrong key", func(t *testing.T, r *rdmanet.Region) rdmanet.Token {
			tok := r.Token()
			tok.RKey ^= 0x5a5a00
			return tok
		}},
	} {
		for _, write := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, write %t", tc.name, write), func(t *testing.T) {
				cli, srv := rdmaPair(t, rdmanet.Config{})
				r := allocRegion(t, srv, 4096, 1)
				sendToken(t, srv, r.Token())
				tok := recvToken(t, cli)
				p := make([]byte, 64)
				if _, err := cli.ReadAt(tok, 0, p); err != nil {
					t.Fatalf("ReadAt with the good token: %v", err)
				}
				tok = tc.bad(t, r)
				// Deadlines turn a hang into a test failure.
				cli.SetDeadline(time.Now().Add(20 * time.Second))
				srv.SetDeadline(time.Now().Add(20 * time.Second))
				var err error
				if write {
					_, err = cli.WriteAt(tok, 0, p)
				} else {
					_, err = cli.ReadAt(tok, 0, p)
				}
				if !errors.Is(err, rdmanet.ErrRemoteAccess) {
					t.Fatalf("with a bad token: %v, want ErrRemoteAccess", err)
				}
				t.Logf("the error: %v", err)
				if _, err := cli.ReadAt(tok, 0, p); !errors.Is(err, rdmanet.ErrRemoteAccess) {
					t.Errorf("ReadAt on the broken connection: %v, want ErrRemoteAccess", err)
				}
				if _, err := cli.Write(p); !errors.Is(err, rdmanet.ErrRemoteAccess) {
					t.Errorf("Write on the broken connection: %v, want ErrRemoteAccess", err)
				}
				if _, err := cli.Read(p); !errors.Is(err, rdmanet.ErrRemoteAccess) {
					t.Errorf("Read on the broken connection: %v, want ErrRemoteAccess", err)
				}
				start := time.Now()
				if _, err := srv.Read(p); !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("the peer's Read: %v, want ECONNRESET", err)
				}
				t.Logf("the peer's Read failed after %v", time.Since(start))
				if err := cli.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				if err := srv.Close(); err != nil {
					t.Errorf("the peer's Close: %v", err)
				}
			})
		}
	}
}

// Many goroutines' ReadAts and WriteAts at once, more than are in flight
// at most, zero-copy and bounced, beside a stream both ways: each
// goroutine's stripe of the peer's region ends as it wrote it.
func TestOneSidedConcurrent(t *testing.T) {
	requireCM(t)
	const (
		workers = 40
		stripe  = 3000
		rounds  = 15
	)
	cli, srv := rdmaPair(t, rdmanet.Config{BufferSize: 2048, WriteBuffers: 2})
	r := allocRegion(t, srv, workers*stripe, 1)
	local := allocRegion(t, cli, workers*stripe, 2).Bytes()
	tok := r.Token()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := w * stripe
			heap := make([]byte, stripe)
			for i := range rounds {
				p := heap
				if (w+i)%2 == 0 {
					p = local[off : off+stripe]
				}
				n := 1 + (w*7+i*13)%stripe
				at := (w*5 + i*11) % (stripe - n + 1)
				src := p[:n]
				fillRandom(src, uint64(w*1000+i))
				want := bytes.Clone(src)
				if _, err := cli.WriteAt(tok, int64(off+at), src); err != nil {
					t.Error(err)
					return
				}
				dst := p[stripe-n:]
				if _, err := cli.ReadAt(tok, int64(off+at), dst); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(dst, want) {
					t.Errorf("worker %d round %d: read back differs", w, i)
					return
				}
			}
		}()
	}
	const streamed = 2 << 20
	for _, c := range []*rdmanet.Conn{cli, srv} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := c.Write(make([]byte, streamed)); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			peer := srv
			if c == srv {
				peer = cli
			}
			if _, err := io.ReadFull(peer, make([]byte, streamed)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// Deadlines: the read deadline bounds ReadAt, the write deadline
// WriteAt; each ends with a timeout and the connection goes on. Close
// ends them with net.ErrClosed and deregisters the Conn's regions, so
// their memory can be freed.
func TestOneSidedDeadlineAndClose(t *testing.T) {
	requireCM(t)
	cli, srv := rdmaPair(t, rdmanet.Config{})
	r := allocRegion(t, srv, 4096, 1)
	tok := r.Token()
	p := make([]byte, 100)
	timeout := func(what string, err error) {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s past its deadline: %v", what, err)
		}
	}
	cli.SetReadDeadline(time.Now().Add(-time.Second))
	_, err := cli.ReadAt(tok, 0, p)
	timeout("ReadAt", err)
	if _, err := cli.WriteAt(tok, 0, p); err != nil {
		t.Errorf("WriteAt with only the read deadline past: %v", err)
	}
	cli.SetReadDeadline(time.Time{})
	cli.SetWriteDeadline(time.Now().Add(-time.Second))
	_, err = cli.WriteAt(tok, 0, p)
	timeout("WriteAt", err)
	if _, err := cli.ReadAt(tok, 0, p); err != nil {
		t.Errorf("ReadAt with only the write deadline past: %v", err)
	}
	cli.SetWriteDeadline(time.Time{})
	if _, err := cli.WriteAt(tok, 0, p); err != nil {
		t.Errorf("WriteAt after the deadline is cleared: %v", err)
	}

	// A deadline in the future does not end an operation that completes.
	cli.SetDeadline(time.Now().Add(time.Minute))
	if _, err := cli.ReadAt(tok, 0, p); err != nil {
		t.Errorf("ReadAt before its deadline: %v", err)
	}

	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := cli.Register(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := buf.Close(); err == nil {
		t.Fatal("Buffer.Close under a Region succeeded")
	}
	if _, err := cli.ReadAt(tok, 0, lr.Bytes()); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	if _, err := cli.ReadAt(tok, 0, p); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ReadAt after Close: %v, want net.ErrClosed", err)
	}
	if _, err := cli.WriteAt(tok, 0, p); !errors.Is(err, net.ErrClosed) {
		t.Errorf("WriteAt after Close: %v, want net.ErrClosed", err)
	}
	if _, err := cli.Register(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Register after Close: %v, want net.ErrClosed", err)
	}
	if err := lr.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Region.Close after the Conn's Close: %v, want net.ErrClosed", err)
	}
	if err := buf.Close(); err != nil {
		t.Errorf("Buffer.Close after the Conn's Close: %v (the Region is still registered)", err)
	}
}

// A Region's Close waits for this side's operations in its memory: many
// ReadAts into it run while it closes, and each either completes or
// (once it is closing) bounces; none breaks the connection.
func TestOneSidedRegionCloseWhileInUse(t *testing.T) {
	requireCM(t)
	cli, srv := rdmaPair(t, rdmanet.Config{})
	r := allocRegion(t, srv, 1<<16, 1)
	tok := r.Token()
	heap := make([]byte, 1<<16)
	lr, err := cli.Register(heap)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := heap[w*8192 : (w+1)*8192]
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := cli.ReadAt(tok, int64(w*8192), p); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := lr.Close(); err != nil {
		t.Error(err)
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if !bytes.Equal(heap, r.Bytes()) {
		t.Error("the bytes read differ")
	}
}

// In steady state a ReadAt or WriteAt allocates nothing, zero-copy or
// bounced, waiting on the poller or busy-polling.
func TestOneSidedAllocs(t *testing.T) {
	requireCM(t)
	if testutil.Race {
		t.Skip("the race detector's instrumentation allocates")
	}
	for _, busy := range []time.Duration{0, 100 * time.Microsecond} {
		cli, srv := rdmaPair(t, rdmanet.Config{BusyPoll: busy})
		tok := allocRegion(t, srv, 4096, 1).Token()
		local := allocRegion(t, cli, 4096, 2).Bytes()[:64]
		heap := make([]byte, 64)
		for _, tc := range []struct {
			name string
			f    func() (int, error)
		}{
			{"ReadAt zero-copy", func() (int, error) { return cli.ReadAt(tok, 64, local) }},
			{"ReadAt bounced", func() (int, error) { return cli.ReadAt(tok, 64, heap) }},
			{"WriteAt zero-copy", func() (int, error) { return cli.WriteAt(tok, 64, local) }},
			{"WriteAt bounced", func() (int, error) { return cli.WriteAt(tok, 64, heap) }},
		} {
			tc.f() // the bounce memory's allocation, once
			var err error
			allocs := testing.AllocsPerRun(200, func() {
				if _, e := tc.f(); e != nil {
					err = e
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if allocs == 0 {
				t.Logf("%s, BusyPoll %v: no allocation", tc.name, busy)
				continue
			}
			// Neither the call nor the Conn's event goroutine, which parks in
			// cq.Channel.Wait with no context, allocates: where any did is
			// the failure's detail.
			own, react, other, where := allocSites(func() { tc.f() })
			t.Errorf("%s, BusyPoll %v: %.2f allocations a call; in 100 calls, %d in the call, %d in the Conn's event goroutine, %d elsewhere (the profiling's, the runtime's caches); where:\n%s",
				tc.name, busy, allocs, own, react, other, where)
		}
	}
}

// Operations a deadline or Close leaves in flight: their slots come back
// when they complete (more of them than are in flight at most, and the
// connection goes on), a Region's Close waits for those in its memory,
// and Close ends a ReadAt waiting.
func TestOneSidedAbandoned(t *testing.T) {
	requireCM(t)
	const size = 4 << 20
	cli, srv := rdmaPair(t, rdmanet.Config{})
	r := allocRegion(t, srv, size, 1)
	tok := r.Token()
	buf, err := uverbs.AllocBuffer(size)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	lr, err := cli.Register(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	timeouts := 0
	const tries = 40
	for range tries {
		cli.SetReadDeadline(time.Now().Add(100 * time.Microsecond))
		_, err := cli.ReadAt(tok, 0, lr.Bytes())
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			timeouts++
		case err != nil:
			t.Fatal(err)
		}
	}
	t.Logf("%d of %d ReadAts of %d bytes ended by their deadline", timeouts, tries, size)
	cli.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang fails
	if err := lr.Close(); err != nil {
		t.Fatalf("Region.Close with operations left in flight: %v", err)
	}
	if err := buf.Close(); err != nil {
		t.Fatalf("Buffer.Close after the Region's: %v", err)
	}
	p := make([]byte, 1<<20)
	for i := range 2 * 16 {
		if _, err := cli.ReadAt(tok, int64(i*1000), p); err != nil || !bytes.Equal(p, r.Bytes()[i*1000:i*1000+len(p)]) {
			t.Fatalf("ReadAt %d after them: %v", i, err)
		}
	}

	// Close ends a ReadAt waiting (or it completes first).
	done := make(chan error, 1)
	go func() {
		_, err := cli.ReadAt(tok, 0, make([]byte, size))
		done <- err
	}()
	time.Sleep(time.Millisecond)
	if err := cli.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("ReadAt ended by Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close left a ReadAt waiting")
	}
}

// allocSites runs f 100 times with every allocation profiled, and
// counts the objects allocated by the Conn's event goroutine (react), by
// the Conn's other methods (own: the calls'), and elsewhere (other: the
// profiling's own bookkeeping, the runtime's caches, such as the sudogs
// of a select, which its forced GCs empty), naming own's stacks.
func allocSites(f func()) (own, react, other int64, where string) {
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	profile := func() map[[32]uintptr]int64 {
		runtime.GC()
		runtime.GC() // the profile trails by up to two cycles
		var recs []runtime.MemProfileRecord
		n, _ := runtime.MemProfile(nil, true)
		for {
			recs = make([]runtime.MemProfileRecord, n+50)
			var ok bool
			if n, ok = runtime.MemProfile(recs, true); ok {
				break
			}
		}
		m := map[[32]uintptr]int64{}
		for _, r := range recs[:n] {
			m[r.Stack0] += r.AllocObjects
		}
		return m
	}
	before := profile()
	for range 100 {
		f()
	}
	after := profile()
	const conn = "github.com/goverbs/goverbs/rdmanet.(*Conn)."
	var out strings.Builder
	for k, v := range after {
		d := v - before[k]
		if d <= 0 {
			continue
		}
		stk := k[:]
		if i := slices.Index(stk, 0); i >= 0 {
			stk = stk[:i]
		}
		var stack strings.Builder
		inReact, inConn, sudog := false, false, false
		frames := runtime.CallersFrames(stk)
		for {
			fr, more := frames.Next()
			inReact = inReact || fr.Function == conn+"react"
			inConn = inConn || strings.HasPrefix(fr.Function, conn)
			sudog = sudog || fr.Function == "runtime.acquireSudog" // refilling the cache each GC empties
			fmt.Fprintf(&stack, "\t%s %s:%d\n", fr.Function, fr.File, fr.Line)
			if !more {
				break
			}
		}
		switch {
		case inReact:
			react += d
		case inConn && !sudog:
			own += d
			fmt.Fprintf(&out, "%d objects:\n%s", d, stack.String())
		default:
			other += d
		}
	}
	return own, react, other, out.String()
}
