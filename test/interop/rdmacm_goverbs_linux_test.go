package interop

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// goverbs' rdmacm against librdmacm's synchronous examples, rdma_server
// and rdma_client (rdmacm-utils, port 7471): the client posts a 16-byte
// receive, connects and SENDs 16 bytes; the server, its receive posted
// before it accepts, waits for them and SENDs 16 bytes back; then both
// disconnect.

const (
	rdmaServerBin = "/usr/bin/rdma_server"
	rdmaClientBin = "/usr/bin/rdma_client"
	rdmaCMPort    = "7471"
)

// msgConn is the goverbs side's registered memory: a 16-byte receive
// buffer at 0 and a 16-byte send buffer at 64.
type msgConn struct {
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

// setup registers the buffers on c's PD and posts the receive: the
// Config.Setup of both roles, so the peer's SEND finds it.
func (m *msgConn) setup(c *rdmacm.Conn) (err error) {
	if m.buf, err = uverbs.AllocBuffer(4096); err != nil {
		return err
	}
	if m.mr, err = c.PD().RegMR(m.buf.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return err
	}
	sge, err := m.mr.SGE(0, 16)
	if err != nil {
		return err
	}
	_, err = c.QP().PostRecv([]uverbs.RecvWR{{WRID: 1, SGL: []uverbs.SGE{sge}}})
	return err
}

func (m *msgConn) close() {
	if m.mr != nil {
		m.mr.Close()
	}
	if m.buf != nil {
		m.buf.Close()
	}
}

// send SENDs the 16 bytes at 64.
func (m *msgConn) send(t *testing.T, c *rdmacm.Conn, msg string) {
	t.Helper()
	copy(m.buf.Bytes()[64:80], msg)
	sge, err := m.mr.SGE(64, 16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.QP().PostSend([]uverbs.SendWR{{WRID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge}}}); err != nil {
		t.Fatal(err)
	}
}

// awaited holds the completions await polled while it looked for
// another request's (the peer's reply may complete before our send's
// ACK does), for the await that wants them.
var awaited = map[*rdmacm.Conn][]cq.WC{}

// await polls c's CQ until a completion with wrid arrives, and fails on
// an error completion.
func await(t *testing.T, c *rdmacm.Conn, wrid uint64) cq.WC {
	t.Helper()
	for i, wc := range awaited[c] {
		if wc.WRID == wrid {
			awaited[c] = append(awaited[c][:i], awaited[c][i+1:]...)
			return wc
		}
	}
	wcs := make([]cq.WC, 4)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n, err := c.CQ().Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		for k, wc := range wcs[:n] {
			if wc.Status != cq.Success {
				t.Fatalf("completion %+v", wc)
			}
			if wc.WRID == wrid {
				awaited[c] = append(awaited[c], wcs[k+1:n]...)
				return wc
			}
			awaited[c] = append(awaited[c], wc)
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	t.Fatalf("no completion of request %d in 30 s", wrid)
	return cq.WC{}
}

// syncBuffer is a bytes.Buffer a running program writes while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startCmd starts argv, logging the command line, and returns its
// combined output, which the test may read while it runs, and a channel
// with its exit.
func startCmd(t *testing.T, env, argv []string) (*syncBuffer, <-chan error, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	out := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	t.Logf("running: %s", strings.Join(argv, " "))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		done <- cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	return out, done, cmd
}

// TestRDMAServerGoverbsClient: rdma-core's rdma_server, goverbs' client.
func TestRDMAServerGoverbsClient(t *testing.T) {
	env := requireRDMACM(t, rdmaServerBin)
	out, done, _ := startCmd(t, env, []string{rdmaServerBin, "-p", rdmaCMPort})
	addr := rxeAddr + ":" + rdmaCMPort
	t.Logf("goverbs: rdmacm.Dial(ctx, %q, cfg)", addr)
	var m msgConn
	defer m.close()
	cfg := &rdmacm.Config{Setup: m.setup}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var conn *rdmacm.Conn
	for i := 0; ; i++ { // until rdma_server listens: refused (reason 8) before
		var err error
		if conn, err = rdmacm.Dial(ctx, addr, cfg); err == nil {
			break
		}
		m.close()
		m = msgConn{}
		if !errors.Is(err, syscall.ECONNREFUSED) || i == 100 {
			t.Fatalf("dial (attempt %d): %v\nrdma_server:\n%s", i+1, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.send(t, conn, "goverbs->server!")
	await(t, conn, 2)
	wc := await(t, conn, 1)
	if wc.ByteLen != 16 || wc.Opcode != cq.OpRecv {
		t.Errorf("receive %+v", wc)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("rdma_server: %v\n%s", err, out)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("rdma_server did not end:\n%s", out)
	}
	select {
	case <-conn.Disconnected():
	case <-time.After(10 * time.Second):
		t.Error("rdma_server's disconnect did not reach the Conn")
	}
	m.mr.Close()
	m.mr = nil
	if err := conn.Close(); err != nil {
		t.Error(err)
	}
	if !strings.Contains(out.String(), "rdma_server: end 0") {
		t.Errorf("rdma_server's output:\n%s", out)
	}
	t.Logf("rdma_server:\n%s", out)
}

// TestGoverbsServerRDMAClient: goverbs' server, rdma-core's rdma_client.
func TestGoverbsServerRDMAClient(t *testing.T) {
	env := requireRDMACM(t, rdmaClientBin)
	addr := rxeAddr + ":" + rdmaCMPort
	var m msgConn
	defer m.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Logf("goverbs: rdmacm.Listen(ctx, %q, cfg), then Accept", addr)
	l, err := rdmacm.Listen(ctx, addr, &rdmacm.Config{Setup: m.setup})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out, done, _ := startCmd(t, env, []string{rdmaClientBin, "-s", rxeAddr, "-p", rdmaCMPort})
	conn, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("accept: %v\nrdma_client:\n%s", err, out)
	}
	wc := await(t, conn, 1)
	if wc.ByteLen != 16 {
		t.Errorf("receive %+v", wc)
	}
	m.send(t, conn, "server->client!!")
	await(t, conn, 2)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("rdma_client: %v\n%s", err, out)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("rdma_client did not end:\n%s", out)
	}
	select {
	case <-conn.Disconnected():
	case <-time.After(10 * time.Second):
		t.Error("rdma_client's disconnect did not reach the Conn")
	}
	m.mr.Close()
	m.mr = nil
	if err := conn.Close(); err != nil {
		t.Error(err)
	}
	if !strings.Contains(out.String(), "rdma_client: end 0") {
		t.Errorf("rdma_client's output:\n%s", out)
	}
	t.Logf("rdma_client:\n%s", out)
}
