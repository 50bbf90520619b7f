package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
)

// rpingInProcess runs goverbs rping's server and client in-process over
// rxe0's 192.0.2.1, the client again until the server listens, and
// returns what each printed on stdout; both must succeed.
func rpingInProcess(t *testing.T, server, client []string) (srvOut, cliOut string) {
	t.Helper()
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.RequireDevice(t, "/dev/infiniband/rdma_cm")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Logf("server: goverbs rping %s", strings.Join(server, " "))
	t.Logf("client: goverbs rping %s", strings.Join(client, " "))
	var srvStdout, srvStderr bytes.Buffer
	srvDone := make(chan int, 1)
	go func() { srvDone <- rpingTo(ctx, &srvStdout, &srvStderr, server) }()
	var cliStdout, cliStderr bytes.Buffer
	for i := 0; ; i++ { // until the server listens: rejected (reason 8) before
		time.Sleep(100 * time.Millisecond)
		cliStdout.Reset()
		cliStderr.Reset()
		st := rpingTo(ctx, &cliStdout, &cliStderr, client)
		if st == 0 {
			break
		}
		if !strings.Contains(cliStderr.String(), "rejected") || i == 50 {
			cancel()
			<-srvDone
			t.Fatalf("client (attempt %d): status %d\n%s%s\nserver:\n%s%s", i+1, st, cliStdout.String(), cliStderr.String(), srvStdout.String(), srvStderr.String())
		}
	}
	select {
	case st := <-srvDone:
		if st != 0 {
			t.Errorf("server: status %d\n%s%s", st, srvStdout.String(), srvStderr.String())
		}
	case <-time.After(30 * time.Second):
		cancel()
		<-srvDone
		t.Fatalf("the server did not end after the client disconnected:\n%s%s", srvStdout.String(), srvStderr.String())
	}
	if cliStderr.Len() != 0 {
		t.Errorf("client stderr: %s", cliStderr.String())
	}
	if got, want := srvStderr.String(), "server DISCONNECT EVENT...\n"; got != want { // as rping's says
		t.Errorf("server stderr %q, want %q", got, want)
	}
	return srvStdout.String(), cliStdout.String()
}

// TestCLIRping runs goverbs rping against itself: 100 pings with -V and
// -v, every line each side prints checked against the data rping's
// client makes.
func TestCLIRping(t *testing.T) {
	const count, size = 100, 64
	srvOut, cliOut := rpingInProcess(t,
		[]string{"-s", "-a", "192.0.2.1", "-p", "7180", "-v"},
		[]string{"-c", "-a", "192.0.2.1", "-p", "7180", "-C", fmt.Sprint(count), "-S", fmt.Sprint(size), "-vV"})
	var want, wantSrv strings.Builder
	b := make([]byte, size)
	letter := byte('A')
	for i := 0; i < count; i++ {
		letter = rpingFill(b, i, letter)
		fmt.Fprintf(&want, "ping data: %s\n", cString(b))
		fmt.Fprintf(&wantSrv, "server ping data: %s\n", cString(b))
	}
	if cliOut != want.String() {
		t.Errorf("client printed:\n%s\nwant:\n%s", cliOut, want.String())
	}
	if srvOut != wantSrv.String() {
		t.Errorf("server printed:\n%s\nwant:\n%s", srvOut, wantSrv.String())
	}
	t.Logf("client's last line: %s", cliOut[strings.LastIndex(strings.TrimSuffix(cliOut, "\n"), "\n")+1:])
}

// TestCLIRpingDebug: -d prints rping's debug lines, on stdout as
// rping's DEBUG_LOG does: the buffers each side advertises, and the
// server's steps; the server listens on every address (no -a).
func TestCLIRpingDebug(t *testing.T) {
	srvOut, cliOut := rpingInProcess(t,
		[]string{"-s", "-p", "7181", "-d", "-S", "1000"}, // as rping's, the server's buffer must hold the client's
		[]string{"-c", "-a", "192.0.2.1", "-p", "7181", "-C", "3", "-d", "-S", "1000"})
	for _, w := range []string{"Received rkey", "server posted rdma read req", "server received read complete",
		"rdma write from lkey", "server rdma write complete", "server posted go ahead"} {
		if strings.Count(srvOut, w) < 3 {
			t.Errorf("server's debug output says %q fewer than 3 times:\n%s", w, srvOut)
		}
	}
	if n := strings.Count(cliOut, "len 1000"); n != 6 { // start and sink buffer, each ping
		t.Errorf("client advertised %d buffers of 1000 bytes, want 6:\n%s", n, cliOut)
	}
}
