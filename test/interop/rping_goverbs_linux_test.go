package interop

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// goverbs rping against rdma-core's rping (rdmacm-utils), each side as
// server and as client, over rxe0's 192.0.2.1: the client SENDs its
// start buffer's address, rkey and size, the server RDMA READs it, says
// go ahead, gets the client's sink buffer and RDMA WRITEs the data back
// there; 100 times. The client's -V compares what came back with what it
// sent; -v prints each ping, and the test compares every line with the
// data rping's client makes.

// rpingData is what rping's client puts in its buffer for ping n (and
// the -v lines print): "rdma-ping-N: " then letters from 'A' + n (mod
// 58) up, 'A' to 'z' and round, cut to size-1 bytes.
func rpingData(n, size int) string {
	b := []byte("rdma-ping-" + strconv.Itoa(n) + ": ")
	c := byte(65 + n%58)
	for len(b) < size-1 {
		b = append(b, c)
		if c++; c > 122 {
			c = 65
		}
	}
	return string(b[:size-1])
}

// rpingLines is what -v prints for count pings: prefix then the data.
func rpingLines(prefix string, count, size int) string {
	var s strings.Builder
	for i := 0; i < count; i++ {
		fmt.Fprintf(&s, "%s%s\n", prefix, rpingData(i, size))
	}
	return s.String()
}

// pingLines keeps the lines of out that start with prefix.
func pingLines(out, prefix string) string {
	var s strings.Builder
	for _, l := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			s.WriteString(l)
		}
	}
	return s.String()
}

// rpingPair starts server, then client until it gets through (refused
// while the server is not listening yet), and waits for both; each
// command line is logged as it ran. It returns each side's standard
// output, and logs their standard error: apart, since rdma-core's rping
// buffers its stdout, and its stderr lines would land in the middle of
// a ping's line.
func rpingPair(t *testing.T, env, server, client []string) (srvOut, cliOut string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type output struct{ stdout, stderr bytes.Buffer }
	start := func(argv []string) (*exec.Cmd, *output) {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = env
		var out output
		cmd.Stdout, cmd.Stderr = &out.stdout, &out.stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", strings.Join(argv, " "), err)
		}
		return cmd, &out
	}
	all := func(o *output) string { return o.stdout.String() + o.stderr.String() }
	t.Logf("server: %s", strings.Join(server, " "))
	t.Logf("client: %s", strings.Join(client, " "))
	srv, srvBuf := start(server)
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Wait() }()
	for i := 0; ; i++ {
		time.Sleep(200 * time.Millisecond)
		cli, cliBuf := start(client)
		err := cli.Wait()
		out := all(cliBuf)
		if err == nil || rpingExitRace(t, "client", err, out) {
			cliOut = cliBuf.stdout.String()
			t.Logf("client stderr: %q", cliBuf.stderr.String())
			if i > 0 {
				t.Logf("the client got through at attempt %d", i+1)
			}
			break
		}
		notYet := strings.Contains(strings.ToLower(out), "rejected") || strings.Contains(out, "UNREACHABLE")
		select {
		case serr := <-srvDone:
			t.Fatalf("server ended (%v) before a client got through:\n%s\nlast client (%v):\n%s", serr, all(srvBuf), err, out)
		default:
		}
		if !notYet || i == 50 || ctx.Err() != nil {
			srv.Process.Kill()
			<-srvDone
			t.Fatalf("client (attempt %d): %v\n%s\nserver:\n%s", i+1, err, out, all(srvBuf))
		}
	}
	select {
	case err := <-srvDone:
		if err != nil && !rpingExitRace(t, "server", err, all(srvBuf)) {
			t.Fatalf("server: %v\n%s\nclient:\n%s", err, all(srvBuf), cliOut)
		}
	case <-time.After(30 * time.Second):
		srv.Process.Kill()
		<-srvDone
		t.Fatalf("the server did not end within 30 s of its client:\n%s\nclient:\n%s", all(srvBuf), cliOut)
	}
	t.Logf("server stderr: %q", srvBuf.stderr.String())
	return srvBuf.stdout.String(), cliOut
}

func TestRpingGoverbs(t *testing.T) {
	env := requireRDMACM(t, rpingBin, goverbsBin)
	ours := []string{goverbsBin, "rping"}
	theirs := []string{rpingBin}
	const count = 100
	port := 7190
	for _, tc := range []struct {
		name           string
		server, client []string
		size           int // 0: the default, 64
	}{
		{"rdma-core server, goverbs client", theirs, ours, 0},
		{"goverbs server, rdma-core client", ours, theirs, 0},
		{"rdma-core server, goverbs client, -S 23", theirs, ours, 23},
		{"goverbs server, rdma-core client, -S 23", ours, theirs, 23},
		{"rdma-core server, goverbs client, -S 65535", theirs, ours, 65535},
		{"goverbs server, rdma-core client, -S 65535", ours, theirs, 65535},
		{"rdma-core server, goverbs client, IPv6", theirs, ours, 0},
		{"goverbs server, rdma-core client, IPv6", ours, theirs, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port++
			addr := rxeAddr
			if strings.HasSuffix(tc.name, "IPv6") {
				addr = rxeAddr6
			}
			flags := []string{"-a", addr, "-p", strconv.Itoa(port)}
			size := 64
			if tc.size != 0 {
				size = tc.size
				flags = append(flags, "-S", strconv.Itoa(size))
			}
			// -v on both sides at the default size: 100 lines of up to
			// 64 bytes; the larger sizes are checked by the client's -V.
			verbose := tc.size == 0
			srv := append(append(append([]string{}, tc.server...), "-s"), flags...)
			cli := append(append(append([]string{}, tc.client...), "-c"), flags...)
			cli = append(cli, "-C", strconv.Itoa(count), "-V")
			if verbose {
				srv = append(srv, "-v")
				cli = append(cli, "-v")
			}
			srvOut, cliOut := rpingPair(t, env, srv, cli)
			// A -V mismatch ("data mismatch!") ends the client with a
			// failure, which rpingPair reports.
			if verbose {
				if got, want := pingLines(cliOut, "ping data: "), rpingLines("ping data: ", count, size); got != want {
					t.Errorf("client printed:\n%s\nwant:\n%s\nall of its output:\n%s", got, want, cliOut)
				}
				if got, want := pingLines(srvOut, "server ping data: "), rpingLines("server ping data: ", count, size); got != want {
					t.Errorf("server printed:\n%s\nwant:\n%s\nall of its output:\n%s", got, want, srvOut)
				}
				t.Logf("server:\n%s\nclient:\n%s", srvOut, cliOut)
			} else {
				t.Logf("server output: %q; client output: %q", srvOut, cliOut)
			}
		})
	}
}
