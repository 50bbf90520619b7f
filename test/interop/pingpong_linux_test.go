package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
)

const (
	goverbsBin = "/bin/goverbs"
	rcPingpong = "/usr/bin/ibv_rc_pingpong"
	udPingpong = "/usr/bin/ibv_ud_pingpong"
)

// tool is one side's program: goverbs' or rdma-core's.
type tool struct {
	name string
	argv []string
	env  []string
}

// tools returns goverbs' pingpong and rdma-core's, for RC or UD.
func tools(t *testing.T, ud bool) (ours, theirs tool) {
	t.Helper()
	testutil.RequireDevice(t, testutil.DevicePath)
	c := rcPingpong
	oursArgv := []string{goverbsBin, "pingpong"}
	if ud {
		c = udPingpong
		oursArgv = append(oursArgv, "-t", "ud")
	}
	for _, p := range []string{goverbsBin, c} {
		if _, err := os.Stat(p); err != nil {
			if testutil.InVM() {
				t.Fatalf("%s is missing in the VM: %v", p, err)
			}
			t.Skipf("%s is missing: run in the VM (make vmtest RUN=%s)", p, t.Name())
		}
	}
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	lib := "LD_LIBRARY_PATH=/lib/" + triplet + ":/usr/lib/" + triplet
	return tool{"goverbs", oursArgv, nil}, tool{"rdma-core", []string{c}, []string{lib}}
}

var nextPort atomic.Int32

// run starts server then client with the same flags and waits for both.
func run(t *testing.T, server, client tool, flags []string) (string, string) {
	t.Helper()
	port := fmt.Sprint(18515 + nextPort.Add(1))
	flags = append([]string{"-d", "rxe0", "-g", "1", "-p", port}, flags...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(tl tool, extra ...string) (*exec.Cmd, *bytes.Buffer) {
		argv := append(append(append([]string{}, tl.argv...), flags...), extra...)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), tl.env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", tl.name, err)
		}
		return cmd, &out
	}
	srv, srvOut := start(server)
	var cli *exec.Cmd
	var cliOut *bytes.Buffer
	// The server needs a moment to listen; the client retries until it can.
	for i := 0; ; i++ {
		time.Sleep(100 * time.Millisecond)
		cli, cliOut = start(client, "127.0.0.1")
		err := cli.Wait()
		if err == nil {
			break
		}
		if !strings.Contains(cliOut.String(), "onnect") || i == 50 {
			srv.Process.Kill()
			srv.Wait()
			t.Fatalf("%s client: %v\n%s\n%s server:\n%s", client.name, err, cliOut, server.name, srvOut)
		}
	}
	if err := srv.Wait(); err != nil {
		t.Fatalf("%s server: %v\n%s\n%s client:\n%s", server.name, err, srvOut, client.name, cliOut)
	}
	return srvOut.String(), cliOut.String()
}

// checkRun checks what both sides printed: each saw the other's QPN and
// finished the iterations.
func checkRun(t *testing.T, srv, cli string, iters int) {
	t.Helper()
	for name, out := range map[string]string{"server": srv, "client": cli} {
		if !strings.Contains(out, fmt.Sprintf("%d iters in", iters)) || !strings.Contains(out, "remote address:") {
			t.Errorf("%s output:\n%s", name, out)
		}
	}
	local := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "local address:") {
				_, qpn, _ := strings.Cut(l, "QPN ")
				q, _, _ := strings.Cut(qpn, ",")
				return q
			}
		}
		return "?"
	}
	if !strings.Contains(cli, "remote address: LID 0x0000, QPN "+local(srv)) ||
		!strings.Contains(srv, "remote address: LID 0x0000, QPN "+local(cli)) {
		t.Errorf("the two sides do not name each other's QPs:\nserver:\n%s\nclient:\n%s", srv, cli)
	}
}

// Every combination: goverbs and rdma-core as server and client, polling
// and event mode, sizes 1, 4096 and 65536. goverbs checks the bytes it
// receives (rdma-core fills its buffer with 0x7b; so does goverbs).
func TestRCPingpongInterop(t *testing.T) { testInterop(t, false, []int{1, 4096, 65536}) }

// The same for UD against ibv_ud_pingpong, sizes up to the port's active
// MTU (1024 on soft-RoCE over a dummy netdev).
func TestUDPingpongInterop(t *testing.T) { testInterop(t, true, []int{1, 1024}) }

func testInterop(t *testing.T, ud bool, sizes []int) {
	ours, theirs := tools(t, ud)
	const iters = 200
	for _, pair := range [][2]tool{{ours, theirs}, {theirs, ours}, {ours, ours}} {
		for _, events := range []bool{false, true} {
			for _, size := range sizes {
				mode := "poll"
				flags := []string{"-n", fmt.Sprint(iters), "-s", fmt.Sprint(size)}
				if events {
					mode = "events"
					flags = append(flags, "-e")
				}
				name := fmt.Sprintf("%s-server/%s-client/%s/%d", pair[0].name, pair[1].name, mode, size)
				t.Run(name, func(t *testing.T) {
					srv, cli := run(t, pair[0], pair[1], flags)
					checkRun(t, srv, cli, iters)
					t.Logf("client: %s", lastLine(cli))
				})
			}
		}
	}
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}
