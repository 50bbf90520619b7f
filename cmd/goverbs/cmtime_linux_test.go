package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/rdmacm"
)

// TestCLICmtime runs goverbs cmtime against itself over rxe0's
// 192.0.2.1: 20 connections made at once and closed at once, the report
// read back, then 20 more with -steps on the low level; the server
// stopped by its context; no fd outlives them. Then 5 and 5 over
// 2001:db8::1.
func TestCLICmtime(t *testing.T) {
	t.Run("IPv4", func(t *testing.T) { cliCmtime(t, "192.0.2.1", "7190", 20) })
	t.Run("IPv6", func(t *testing.T) { cliCmtime(t, "2001:db8::1", "7191", 5) })
}

func cliCmtime(t *testing.T, ip, port string, n int) {
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.RequireDevice(t, "/dev/infiniband/rdma_cm")
	testutil.CheckFDLeak(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srvCtx, stop := context.WithCancel(ctx)
	var srvOut, srvErr bytes.Buffer
	srvDone := make(chan int, 1)
	go func() { srvDone <- cmtimeTo(srvCtx, &srvOut, &srvErr, []string{"-b", ip, "-p", port}) }()
	// One connection first, until the server listens (refused before).
	for i := 0; ; i++ {
		conn, err := rdmacm.Dial(ctx, net.JoinHostPort(ip, port), nil)
		if err == nil {
			conn.Close()
			break
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || i == 50 {
			stop()
			<-srvDone
			t.Fatalf("dial (attempt %d): %v\nserver: %s%s", i+1, err, srvOut.String(), srvErr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var out, errOut bytes.Buffer
	st := cmtimeTo(ctx, &out, &errOut, []string{"-s", ip, "-p", port, "-c", strconv.Itoa(n)})
	// Then the same on the low level, a step at a time.
	var stepsOut, stepsErr bytes.Buffer
	stepsSt := cmtimeTo(ctx, &stepsOut, &stepsErr, []string{"-steps", "-s", ip, "-p", port, "-c", strconv.Itoa(n)})
	stop()
	if srvSt := <-srvDone; srvSt != 0 || srvErr.Len() != 0 {
		t.Errorf("server: status %d\n%s%s", srvSt, srvOut.String(), srvErr.String())
	}
	if st != 0 || errOut.Len() != 0 {
		t.Fatalf("client: status %d\n%s%s", st, out.String(), errOut.String())
	}
	t.Logf("client:\n%s", out.String())
	row := `\s+\d+\.\d\d\s+\d+\.\d\d\s+\d+\.\d\d\s+\d+\.\d\d\n`
	if !regexp.MustCompile(`^step +total ms +max ms +min us +us / conn\nconnect +:` + row + `disconnect +:` + row +
		strconv.Itoa(n) + ` connections: \d+\.\d\d us per connection, setup and teardown\n$`).MatchString(out.String()) {
		t.Errorf("client's report:\n%s", out.String())
	}
	t.Logf("client -steps:\n%s", stepsOut.String())
	if stepsSt != 0 || stepsErr.Len() != 0 {
		t.Fatalf("client -steps: status %d\n%s%s", stepsSt, stepsOut.String(), stepsErr.String())
	}
	steps := `^step +total ms +max ms +min us +us / conn\n`
	for _, s := range []string{"create id", "resolve addr", "resolve route", "create qp", "connect", "disconnect", "destroy qp", "destroy"} {
		steps += s + ` *:` + row
	}
	if !regexp.MustCompile(steps + strconv.Itoa(n) + ` connections: \d+\.\d\d us per connection, setup and teardown\n` +
		`create qp in parts, us per connection: pd \d+\.\d\d, comp channel \d+\.\d\d, cq \d+\.\d\d, qp \d+\.\d\d, attach \(init\) \d+\.\d\d\n$`).MatchString(stepsOut.String()) {
		t.Errorf("client -steps' report:\n%s", stepsOut.String())
	}
	if got, want := srvOut.String(), fmt.Sprintf("%d connections served\n", 2*n+1); got != want { // the first, then n and n
		t.Errorf("server printed %q, want %q", got, want)
	}
}
