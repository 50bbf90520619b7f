package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// mwpeer is the C side of the memory-window interop test
// (testdata/mwpeer.c): no rdma-core program binds windows, so the VM
// harness compiles this one against the guest's libibverbs.
const mwpeer = "/bin/mwpeer"

// windowMsg is what each side writes through the other's window.
const windowMsg = "written through a window" // 24 bytes

// cPeer is a running mwpeer and its lines.
type cPeer struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
}

func startCPeer(t *testing.T, role string) *cPeer {
	t.Helper()
	if _, err := os.Stat(mwpeer); err != nil {
		if testutil.InVM() && runtime.GOARCH == "amd64" {
			t.Fatalf("%s is missing in the VM: %v", mwpeer, err)
		}
		// The harness compiles it with the host's gcc, for the host's
		// architecture only (the gate's host is amd64).
		t.Skipf("%s is missing (the VM harness builds it for amd64 guests): %v", mwpeer, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	p := &cPeer{t: t, cmd: exec.CommandContext(ctx, mwpeer, role, "rxe0", fmt.Sprint(rdmatest.GIDIndex()))}
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	p.cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH=/lib/"+triplet+":/usr/lib/"+triplet)
	p.cmd.Stderr = &p.stderr
	var err error
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewScanner(out)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.in.Close()
		p.cmd.Wait()
	})
	return p
}

// hear returns the fields after word of mwpeer's next line, which must
// start with it.
func (p *cPeer) hear(word string) []string {
	p.t.Helper()
	if !p.out.Scan() {
		p.in.Close()
		err := p.cmd.Wait()
		p.t.Fatalf("waiting for mwpeer's %q: it ended (%v): %s", word, err, strings.TrimSpace(p.stderr.String()))
	}
	f := strings.Fields(p.out.Text())
	if len(f) == 0 || f[0] != word {
		p.t.Fatalf("waiting for mwpeer's %q: it said %q", word, p.out.Text())
	}
	return f[1:]
}

func (p *cPeer) say(format string, a ...any) {
	p.t.Helper()
	if _, err := fmt.Fprintf(p.in, format+"\n", a...); err != nil {
		p.t.Fatalf("to mwpeer: %v: %s", err, p.stderr.String())
	}
}

// finish waits for mwpeer's successful exit.
func (p *cPeer) finish() {
	p.t.Helper()
	p.in.Close()
	if err := p.cmd.Wait(); err != nil {
		p.t.Fatalf("mwpeer: %v: %s", err, strings.TrimSpace(p.stderr.String()))
	}
}

// mwSide is goverbs' side: an RC QP on rxe0 with a buffer registered for
// binding windows, connected to mwpeer.
type mwSide struct {
	pd  *uverbs.PD
	cq  *cq.CQ
	qp  *uverbs.QP
	mr  *uverbs.MR
	mem []byte
}

func newMWSide(t *testing.T, p *cPeer) *mwSide {
	t.Helper()
	c := rdmatest.Open(t)
	s := &mwSide{}
	var err error
	if s.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.pd.Close() })
	buf, err := uverbs.AllocBuffer(16384)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	s.mem = buf.Bytes()
	for i := range s.mem {
		s.mem[i] = byte(i * 7)
	}
	if s.mr, err = s.pd.RegMR(s.mem, uverbs.AccessLocalWrite|uverbs.AccessMWBind); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.mr.Close() })
	if s.cq, err = c.NewCQ(cq.Config{Size: 16}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cq.Close() })
	if s.qp, err = s.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.qp.Close() })

	// Exchange QPN, PSN and GID, then connect.
	f := p.hear("qp")
	var remote uverbs.Endpoint
	g, err := hex.DecodeString(f[2])
	if _, perr := fmt.Sscan(f[0]+" "+f[1], &remote.QPN, &remote.PSN); perr != nil || err != nil || len(g) != 16 {
		t.Fatalf("mwpeer's qp line %q", f)
	}
	copy(remote.GID[:], g)
	gi := rdmatest.GIDIndex()
	local := uverbs.Endpoint{QPN: s.qp.QPN(), PSN: 0x515, GID: rdmatest.GID(t, gi)}
	p.say("qp %d %d %x", local.QPN, local.PSN, local.GID[:])
	if err := s.qp.ConnectRC(local, remote, &uverbs.ConnectOptions{Port: 1, Access: rdmatest.AllAccess,
		PathMTU: uverbs.MTU1024, GIDIndex: gi, MaxRdAtomic: 1, MaxDestRdAtomic: 1, MinRNRTimer: 12}); err != nil {
		t.Fatal(err)
	}
	return s
}

// post posts one signaled request and returns its completion.
func (s *mwSide) post(t *testing.T, wr uverbs.SendWR) cq.WC {
	t.Helper()
	wr.Flags |= uverbs.SendSignaled
	if _, err := s.qp.PostSend([]uverbs.SendWR{wr}); err != nil {
		t.Fatalf("post %v: %v", wr.Opcode, err)
	}
	return rdmatest.PollN(t, s.cq, 1)[0]
}

// TestMemoryWindowInterop binds type-2 memory windows on each side of a
// connection between goverbs and rdma-core (libibverbs and its rxe
// provider, in testdata/mwpeer.c): the other side writes through the
// window, invalidates it with a send with invalidate, and its next write
// is refused with the memory unchanged.
func TestMemoryWindowInterop(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)

	t.Run("rdma-core binds", func(t *testing.T) {
		p := startCPeer(t, "owner")
		s := newMWSide(t, p)
		f := p.hear("window")
		var addr uint64
		var rkey uint32
		if _, err := fmt.Sscan(f[0]+" "+f[1], &addr, &rkey); err != nil {
			t.Fatalf("mwpeer's window line %q", f)
		}
		copy(s.mem, windowMsg)
		sge := rdmatest.SGE(t, s.mr, 0, len(windowMsg))
		write := uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{sge}, RemoteAddr: addr + 100, RKey: rkey}
		if w := s.post(t, write); w.Status != cq.Success {
			t.Fatalf("write through rdma-core's window: %v", w.Status)
		}
		p.say("written")
		p.hear("ready")
		if w := s.post(t, uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSendWithInv, Imm: rkey,
			SGL: []uverbs.SGE{rdmatest.SGE(t, s.mr, 0, 8)}}); w.Status != cq.Success {
			t.Fatalf("send with invalidate: %v", w.Status)
		}
		p.hear("invalidated")
		if w := s.post(t, write); w.Status != cq.RemAccessErr {
			t.Errorf("write through the invalidated window: %v, want %v", w.Status, cq.RemAccessErr)
		}
		p.say("tried")
		p.hear("unchanged")
		p.finish()
	})

	t.Run("goverbs binds", func(t *testing.T) {
		p := startCPeer(t, "peer")
		s := newMWSide(t, p)
		mw, err := s.pd.AllocMW(uverbs.MWType2)
		if err != nil {
			t.Fatal(err)
		}
		defer mw.Close() // before the QP: rxe holds a bound window's QP
		win := uverbs.MWBind{MW: mw, MR: s.mr, Addr: s.mr.Addr() + 4096, Length: 4096, Access: uverbs.AccessRemoteWrite}
		if w := s.post(t, uverbs.SendWR{WRID: 1, Opcode: uverbs.WRBindMW, Bind: &win}); w.Status != cq.Success || w.Opcode != cq.OpBindMW {
			t.Fatalf("bind: %+v (%v)", w, w.Status)
		}
		key := mw.RKey()
		p.say("window %d %d", win.Addr, key)
		p.hear("written")
		if got := s.mem[4096+100 : 4096+100+len(windowMsg)]; string(got) != windowMsg {
			t.Fatalf("rdma-core wrote %q through the window", got)
		}
		if _, err := s.qp.PostRecv([]uverbs.RecvWR{{WRID: 3, SGL: []uverbs.SGE{rdmatest.SGE(t, s.mr, 12288, 64)}}}); err != nil {
			t.Fatal(err)
		}
		p.say("ready")
		p.hear("sent")
		w := rdmatest.PollN(t, s.cq, 1)[0]
		if w.Status != cq.Success || w.Opcode != cq.OpRecv || w.Flags&cq.WithInv == 0 || w.Imm != key {
			t.Fatalf("receive of rdma-core's send with invalidate: %+v (%v), want WithInv and %#x", w, w.Status, key)
		}
		before := crc32.ChecksumIEEE(s.mem)
		// The completion told goverbs the window is free: a local
		// invalidation is refused before it reaches rxe.
		if _, err := s.qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRLocalInv, Bind: &uverbs.MWBind{MW: mw}}}); !errors.Is(err, unix.EINVAL) {
			t.Errorf("local invalidate of the window rdma-core invalidated: %v, want EINVAL", err)
		}
		p.say("again")
		if f := p.hear("status"); strings.Join(f, " ") != "remote access error" {
			t.Errorf("rdma-core's write through the invalidated window: %q, want remote access error", strings.Join(f, " "))
		}
		if crc32.ChecksumIEEE(s.mem) != before {
			t.Error("the memory changed after the window was invalidated")
		}
		p.finish()
	})
}
