package interop

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// TestSRQServerRDMAClientsAndDials: a goverbs Listener whose connections
// share one SRQ and one CQ (rdmacm.Config.SRQ and CQ) serves rdma-core's
// rdma_client and goverbs' Dial at once: three of each connect, each
// SENDs 16 bytes, which land in the SRQ's one pool of receives; the
// server answers each on the connection its completion names.
func TestSRQServerRDMAClientsAndDials(t *testing.T) {
	env := requireRDMACM(t, rdmaClientBin)
	const port, cClients, goClients, pool, slot = "7473", 3, 3, 16, 64
	addr := net.JoinHostPort(rxeAddr, port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	dev, err := uverbs.Open("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	ch, err := dev.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	scq, err := dev.NewCQ(cq.Config{Size: 256, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	defer scq.Close()
	srq, err := pd.NewSRQ(uverbs.SRQConfig{MaxWR: pool, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Close()
	buf, err := uverbs.AllocBuffer((pool + 1) * slot)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	repost := func(i uint64) {
		sge, err := mr.SGE(int(i)*slot, slot)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srq.PostRecv([]uverbs.RecvWR{{WRID: i, SGL: []uverbs.SGE{sge}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range uint64(pool) {
		repost(i)
	}

	t.Logf("goverbs: rdmacm.Listen(ctx, %q, &rdmacm.Config{CQ, SRQ}), %d × Accept", addr, cClients+goClients)
	l, err := rdmacm.Listen(ctx, addr, &rdmacm.Config{CQ: scq, SRQ: srq})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *rdmacm.Conn, cClients+goClients)
	go func() {
		for range cClients + goClients {
			c, err := l.Accept(ctx)
			if err != nil {
				t.Errorf("accept: %v", err)
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var outs []*syncBuffer
	var dones []<-chan error
	for range cClients {
		out, done, _ := startCmd(t, env, []string{rdmaClientBin, "-s", rxeAddr, "-p", port})
		outs, dones = append(outs, out), append(dones, done)
	}
	gos := make([]*rdmacm.Conn, goClients)
	mems := make([]*msgConn, goClients)
	for i := range gos {
		m := new(msgConn)
		mems[i] = m
		defer m.close()
		c, err := rdmacm.Dial(ctx, addr, &rdmacm.Config{Setup: m.setup})
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer c.Close()
		gos[i] = c
		m.send(t, c, fmt.Sprintf("goverbs dial %2d!", i))
	}

	byQPN := map[uint32]*rdmacm.Conn{}
	for range cClients + goClients {
		c, ok := <-accepted
		if !ok {
			t.FailNow()
		}
		defer c.Close()
		if c.CQ() != scq || c.PD() != pd {
			t.Errorf("accepted connection on CQ %p and PD %p, want the Listener's %p and %p", c.CQ(), c.PD(), scq, pd)
		}
		byQPN[c.QP().QPN()] = c
	}
	// Every message, from whichever client, lands in the SRQ; the
	// answer goes back on the connection its completion names.
	reply := buf.Bytes()[pool*slot:]
	copy(reply, "server->client!!")
	rsge, err := mr.SGE(pool*slot, 16)
	if err != nil {
		t.Fatal(err)
	}
	wcs := make([]cq.WC, 16)
	got, sent := 0, 0
	deadline := time.Now().Add(30 * time.Second)
	for got < cClients+goClients || sent < got {
		n, err := scq.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wcs[:n] {
			if w.Status != cq.Success {
				t.Fatalf("server completion %+v (%v)", w, w.Status)
			}
			if w.Opcode != cq.OpRecv {
				sent++
				continue
			}
			c := byQPN[w.QPNum]
			if c == nil || w.ByteLen != 16 {
				t.Fatalf("a receive %+v of no accepted connection (%v)", w, c)
			}
			t.Logf("QP %#x from %v: %q", w.QPNum, c.RemoteAddr(), buf.Bytes()[int(w.WRID)*slot:][:16])
			got++
			repost(w.WRID)
			if _, err := c.QP().PostSend([]uverbs.SendWR{{WRID: 100, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{rsge}}}); err != nil {
				t.Fatal(err)
			}
		}
		if n == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d messages of %d, %d answers sent, in 30 s", got, cClients+goClients, sent)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i, c := range gos {
		wc := await(t, c, 1)
		if msg := string(mems[i].buf.Bytes()[:16]); wc.ByteLen != 16 || msg != "server->client!!" {
			t.Errorf("goverbs dial %d got %q (%+v)", i, msg, wc)
		}
		await(t, c, 2)
	}
	for i, done := range dones {
		select {
		case err := <-done:
			if err != nil || !strings.Contains(outs[i].String(), "rdma_client: end 0") {
				t.Errorf("rdma_client %d: %v\n%s", i, err, outs[i])
			}
		case <-time.After(30 * time.Second):
			t.Errorf("rdma_client %d did not end", i)
		}
	}
}
