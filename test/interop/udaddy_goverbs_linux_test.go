package interop

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// goverbs' UD over the rdma_cm (rdmacm.DialUD, ListenUD) against
// rdma-core's udaddy (rdmacm-utils), RDMA_PS_UDP on port 7174, both
// roles. udaddy's pattern (librdmacm/examples/udaddy.c): each side posts
// message_count (-C 10) receives of 100 + 40 (GRH) bytes before it
// connects or accepts; the client, on ESTABLISHED, makes its AH from the
// event's ah_attr and sends 10 SEND_WITH_IMMs of 100 bytes with its QP
// number (big-endian) as immediate data and the event's QPN and Q_Key;
// the server waits for 10 completions, makes its reply AH from the first
// one's GRH (ibv_create_ah_from_wc) and the immediate data's QPN, with
// its own QP's Q_Key, and sends 10 back; the client waits for 10. Both
// print "return status 0" and exit 0 when all went well.

const (
	udaddyPort  = "7174" // udaddyBin is rdmacm_linux_test.go's
	udaddyCount = 10
	udaddySize  = 100
)

// udMem is the goverbs side's memory: 16 receive slots of 140 bytes at
// 256-byte strides, and the send payload at 4096.
type udMem struct {
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

const udSendOff = 4096

func (m *udMem) setup(u *rdmacm.UDConn) (err error) {
	if m.buf, err = uverbs.AllocBuffer(8192); err != nil {
		return err
	}
	if m.mr, err = u.PD().RegMR(m.buf.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return err
	}
	for i := range 16 {
		sge, err := m.mr.SGE(i*256, uverbs.UDRecvSize(udaddySize))
		if err != nil {
			return err
		}
		if _, err := u.QP().PostRecv([]uverbs.RecvWR{{WRID: uint64(i), SGL: []uverbs.SGE{sge}}}); err != nil {
			return err
		}
	}
	return nil
}

func (m *udMem) close() {
	if m.mr != nil {
		m.mr.Close()
	}
	if m.buf != nil {
		m.buf.Close()
	}
}

// sendN posts n datagrams of udaddySize bytes to p, signaled, with u's
// QPN as immediate data, WRIDs 100 on (pollSplit tells them by that).
func (m *udMem) sendN(t *testing.T, u *rdmacm.UDConn, p rdmacm.UDPeer, n int) {
	t.Helper()
	copy(m.buf.Bytes()[udSendOff:], bytes.Repeat([]byte("goverbs!"), udaddySize/8+1)[:udaddySize])
	sge, err := m.mr.SGE(udSendOff, udaddySize)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		wr := uverbs.SendWR{WRID: uint64(100 + i), Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled,
			Imm: u.QP().QPN(), SGL: []uverbs.SGE{sge}, AH: p.AH, RemoteQPN: p.QPN, RemoteQKey: p.QKey}
		if _, err := u.QP().PostSend([]uverbs.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
	}
}

// pollSplit polls u's CQ, which the sends and the receives share, until
// it has sends send completions, each successful, and recvs receive
// completions, which it returns: a peer's reply may complete before our
// own send's completion is polled.
func pollSplit(t *testing.T, u *rdmacm.UDConn, sends, recvs int) []cq.WC {
	t.Helper()
	var got []cq.WC
	sent := 0
	for _, wc := range pollUD(t, u, sends+recvs) {
		switch {
		case wc.WRID < 100: // a receive (checkRecvs checks it)
			got = append(got, wc)
		case wc.Status == cq.Success && wc.Opcode == cq.OpSend:
			sent++
		default:
			t.Fatalf("send completion %+v", wc)
		}
	}
	if sent != sends || len(got) != recvs {
		t.Fatalf("%d send and %d receive completions, want %d and %d", sent, len(got), sends, recvs)
	}
	return got
}

// pollUD polls u's CQ for n completions, for at most 30 s.
func pollUD(t *testing.T, u *rdmacm.UDConn, n int) []cq.WC {
	t.Helper()
	var out []cq.WC
	wcs := make([]cq.WC, 16)
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n {
		k, err := u.CQ().Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, wcs[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d completions of %d in 30 s", len(out), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return out
}

// checkRecvs checks n received datagrams from QPN src.
func checkRecvs(t *testing.T, wcs []cq.WC, src uint32) {
	t.Helper()
	for _, wc := range wcs {
		if wc.Status != cq.Success || wc.Opcode != cq.OpRecv || wc.ByteLen != uint32(uverbs.UDRecvSize(udaddySize)) ||
			wc.SrcQP != src || wc.Flags&cq.WithImm == 0 || wc.Imm != src {
			t.Errorf("receive %+v: want %d bytes from QPN %#x with it as immediate data", wc, uverbs.UDRecvSize(udaddySize), src)
		}
	}
}

// awaitExit waits for the program's exit and checks its report.
func awaitExit(t *testing.T, name string, done <-chan error, out *syncBuffer) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not end:\n%s", name, out)
	}
	if s := out.String(); !strings.Contains(s, "data transfers complete") || !strings.Contains(s, "return status 0") {
		t.Errorf("%s's output:\n%s", name, s)
	}
	t.Logf("%s:\n%s", name, out)
}

// TestUdaddyServerGoverbsClient: rdma-core's udaddy server, goverbs'
// DialUD client.
func TestUdaddyServerGoverbsClient(t *testing.T) {
	env := requireRDMACM(t, udaddyBin)
	out, done, _ := startCmd(t, env, []string{udaddyBin, "-b", rxeAddr, "-C", "10"})
	addr := rxeAddr + ":" + udaddyPort
	t.Logf("goverbs: rdmacm.DialUD(ctx, %q, cfg), %d sends of %d bytes, then %d receives", addr, udaddyCount, udaddySize, udaddyCount)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var m udMem
	defer m.close()
	var u *rdmacm.UDConn
	for i := 0; ; i++ { // until udaddy listens: refused (SIDR status 1) before
		var err error
		if u, err = rdmacm.DialUD(ctx, addr, &rdmacm.Config{SetupUD: m.setup}); err == nil {
			break
		}
		m.close()
		m = udMem{}
		if !errors.Is(err, syscall.ECONNREFUSED) || i == 100 {
			t.Fatalf("dial ud (attempt %d): %v\nudaddy:\n%s", i+1, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p := u.Peer()
	t.Logf("udaddy's QP %#x, Q_Key %#x; ours %#x", p.QPN, p.QKey, u.QP().QPN())
	m.sendN(t, u, p, udaddyCount)
	checkRecvs(t, pollSplit(t, u, udaddyCount, udaddyCount), p.QPN)
	awaitExit(t, "udaddy", done, out)
	m.mr.Close()
	m.mr = nil
	if err := u.Close(); err != nil {
		t.Error(err)
	}
}

// TestGoverbsServerUdaddyClient: goverbs' ListenUD server, rdma-core's
// udaddy client.
func TestGoverbsServerUdaddyClient(t *testing.T) {
	env := requireRDMACM(t, udaddyBin)
	addr := rxeAddr + ":" + udaddyPort
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var m udMem
	defer m.close()
	t.Logf("goverbs: rdmacm.ListenUD(ctx, %q, cfg), Accept, %d receives, then %d sends to ReplyTo(first)", addr, udaddyCount, udaddyCount)
	l, err := rdmacm.ListenUD(ctx, addr, &rdmacm.Config{SetupUD: m.setup})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out, done, _ := startCmd(t, env, []string{udaddyBin, "-s", rxeAddr, "-C", "10"})
	u, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("accept ud: %v\nudaddy:\n%s", err, out)
	}
	wcs := pollUD(t, u, udaddyCount)
	src := wcs[0].SrcQP
	checkRecvs(t, wcs, src)
	first := wcs[0]
	p, err := u.ReplyTo(first, m.buf.Bytes()[int(first.WRID)*256:][:uverbs.UDRecvSize(udaddySize)])
	if err != nil {
		t.Fatal(err)
	}
	defer p.AH.Close()
	t.Logf("udaddy's QP %#x (from its datagrams), Q_Key %#x; ours %#x", p.QPN, p.QKey, u.QP().QPN())
	m.sendN(t, u, p, udaddyCount)
	pollSplit(t, u, udaddyCount, 0)
	awaitExit(t, "udaddy", done, out)
	p.AH.Close()
	m.mr.Close()
	m.mr = nil
	if err := u.Close(); err != nil {
		t.Error(err)
	}
}
