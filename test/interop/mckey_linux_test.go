package interop

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// goverbs' rdmacm.JoinMulticast against rdma-core's mckey (rdmacm-utils),
// over rxe0's 192.0.2.1 and an IPv4 group: mckey receiving what goverbs
// sends to the group, and goverbs receiving what mckey sends. mckey
// waits 3 s after its join before it sends or polls. IPv6 groups are
// left out: the kernel joins none on a RoCE v2 port (rdmacm's
// TestMulticastIPv6).

const (
	mckeyBin   = "/usr/bin/mckey"
	mckeyCount = 10
	mckeySize  = 100
)

// mcastMem is a goverbs member's registered memory: mckeyCount receive
// slots of GRH + mckeySize bytes every 256 bytes, and a send area after.
type mcastMem struct {
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

func (m *mcastMem) setup(u *rdmacm.UDConn) (err error) {
	if m.buf, err = uverbs.AllocBuffer(8192); err != nil {
		return err
	}
	if m.mr, err = u.PD().RegMR(m.buf.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return err
	}
	for i := range mckeyCount {
		sge, err := m.mr.SGE(i*256, uverbs.UDRecvSize(mckeySize))
		if err != nil {
			return err
		}
		if _, err := u.QP().PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{sge}}}); err != nil {
			return err
		}
	}
	return nil
}

func (m *mcastMem) close() {
	if m.mr != nil {
		m.mr.Close()
	}
	if m.buf != nil {
		m.buf.Close()
	}
}

// waitJoined waits up to 30 s for d0 to be a member of the IPv4 group
// (/proc/net/igmp, which names groups by their address's bytes in host
// order, in hex).
func waitJoined(t *testing.T, group string, done <-chan error) {
	t.Helper()
	g := netip.MustParseAddr(group).As4()
	want := fmt.Sprintf("%08X", binary.NativeEndian.Uint32(g[:]))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile("/proc/net/igmp")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), want) {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("mckey ended (%v) before it joined %s", err, group)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no membership of %s (%s) in 30 s:\n%s", group, want, b)
		}
	}
}

// awaitMckey waits for mckey to end well.
func awaitMckey(t *testing.T, out *syncBuffer, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "return status 0") {
			t.Fatalf("mckey: %v\n%s", err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("mckey did not end in 60 s:\n%s", out)
	}
	t.Logf("mckey:\n%s", out)
}

func TestMckeyInterop(t *testing.T) {
	env := requireRDMACM(t, mckeyBin, goverbsBin)
	args := func(group string) []string {
		return []string{mckeyBin, "-m", group, "-b", rxeAddr, "-C", "10", "-S", "100"}
	}

	t.Run("mckey receives, goverbs sends", func(t *testing.T) {
		const group = "239.1.2.4"
		out, done, _ := startCmd(t, env, args(group))
		// mckey's stdout is a pipe, so it prints at its exit: its join
		// shows in the netdev's IPv4 memberships instead (the CM joins
		// the IP group for RoCE v2). It attaches its QP as it reads the
		// join's event, a moment later, then waits 3 s before it polls.
		waitJoined(t, group, done)
		time.Sleep(500 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var m mcastMem
		defer m.close()
		t.Logf("goverbs: rdmacm.JoinMulticast(ctx, %q, %q, &rdmacm.Config{SendOnly: true}), %d datagrams of %d bytes", rxeAddr, group, mckeyCount, mckeySize)
		u, err := rdmacm.JoinMulticast(ctx, rxeAddr, group, &rdmacm.Config{SendOnly: true, SetupUD: m.setup})
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		p := u.Peer()
		sge, err := m.mr.SGE(4096, mckeySize)
		if err != nil {
			t.Fatal(err)
		}
		for i := range mckeyCount {
			if _, err := u.QP().PostSend([]uverbs.SendWR{{WRID: uint64(i), Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled,
				Imm: u.QP().QPN(), SGL: []uverbs.SGE{sge}, AH: p.AH, RemoteQPN: p.QPN, RemoteQKey: p.QKey}}); err != nil {
				t.Fatal(err)
			}
			if w := pollUD(t, u, 1)[0]; w.Status != cq.Success {
				t.Fatalf("send %d: %v", i, w.Status)
			}
		}
		awaitMckey(t, out, done)
		if !strings.Contains(out.String(), "data transfers complete") {
			t.Errorf("mckey did not report its transfers complete:\n%s", out)
		}
	})

	t.Run("mckey receives, goverbs mckey sends", func(t *testing.T) {
		const group = "239.1.2.7"
		out, done, _ := startCmd(t, env, args(group))
		waitJoined(t, group, done)
		ours, oursDone, _ := startCmd(t, nil, []string{goverbsBin, "mckey", "-s", "-m", group, "-b", rxeAddr, "-C", "10", "-S", "100"})
		awaitMckey(t, ours, oursDone)
		awaitMckey(t, out, done)
		if !strings.Contains(out.String(), "data transfers complete") {
			t.Errorf("mckey did not report its transfers complete:\n%s", out)
		}
	})

	t.Run("goverbs receives, mckey sends", func(t *testing.T) {
		const group = "239.1.2.5"
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var m mcastMem
		defer m.close()
		t.Logf("goverbs: rdmacm.JoinMulticast(ctx, %q, %q, cfg), %d receives posted", rxeAddr, group, mckeyCount)
		u, err := rdmacm.JoinMulticast(ctx, rxeAddr, group, &rdmacm.Config{SetupUD: m.setup})
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		out, done, _ := startCmd(t, env, append(args(group), "-s"))
		awaitMckey(t, out, done)
		// mckey posts its sends unsignaled and destroys its QP right
		// after: on 6.1 rxe sends them as they are posted, and all
		// arrive; on 6.12 rxe's requester runs later, from a work item,
		// which the destroy may overtake and flush (runs here saw 0, 1
		// and 10 of 10 arrive). Each that arrives is checked.
		var ws []cq.WC
		wcs := make([]cq.WC, mckeyCount)
		for deadline := time.Now().Add(2 * time.Second); len(ws) < mckeyCount && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			n, err := u.CQ().Poll(wcs[:mckeyCount-len(ws)])
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, wcs[:n]...)
		}
		t.Logf("%d of mckey's %d datagrams arrived", len(ws), mckeyCount)
		if !testutil.KernelAtLeast(t, 6, 12) && len(ws) != mckeyCount {
			t.Errorf("%d of mckey's %d datagrams arrived, want all on this kernel", len(ws), mckeyCount)
		}
		for _, w := range ws {
			if w.Status != cq.Success || w.Opcode != cq.OpRecv || w.ByteLen != uint32(uverbs.UDRecvSize(mckeySize)) ||
				w.Flags&cq.WithImm == 0 || w.Imm != w.SrcQP {
				t.Errorf("receive %+v: want %d bytes with the sender's QPN as immediate", w, uverbs.UDRecvSize(mckeySize))
			}
		}
	})
}
