package interop

import (
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
)

// goverbs cmtime against rdma-core's cmtime (rdmacm-utils), each side as
// server and as client, over rxe0's 192.0.2.1: the client makes 20 RC
// connections at once, then disconnects them all at once and waits for
// the server to answer each. cmtime's server runs until it is killed;
// goverbs' until it is interrupted, and then says how many it served.

const cmtimeBin = "/usr/bin/cmtime"

// awaitListener waits until rxe0 has a CM id more than base had: the
// server's, bound to rxe0's address, listening a moment later. It does
// not connect to find out: cmtime 44's server fails every request after
// its first connection has come and gone ("failure creating qp: No such
// file or directory").
func awaitListener(t *testing.T, base map[string]uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for rdmatest.RXECounts(t)["cm_id"] <= base["cm_id"] {
		if time.Now().After(deadline) {
			t.Fatal("the server made no CM id on rxe0 in a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // from bind to listen
}

func TestCmtimeGoverbs(t *testing.T) {
	env := requireRDMACM(t, cmtimeBin, goverbsBin)
	// A row of either's report: "connect      :       12.34 ...".
	row := func(step string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^` + step + ` *:(\s+\d+\.\d\d){4}$`)
	}
	for _, tc := range []struct {
		name           string
		server, client []string
		rows           []string // the client's report's steps
	}{
		{"cmtime server, goverbs client",
			[]string{cmtimeBin, "-b", rxeAddr, "-p", "7200"},
			[]string{goverbsBin, "cmtime", "-s", rxeAddr, "-c", "20", "-p", "7200"},
			[]string{"connect", "disconnect"}},
		{"goverbs server, cmtime client",
			[]string{goverbsBin, "cmtime", "-b", rxeAddr, "-p", "7201"},
			[]string{cmtimeBin, "-s", rxeAddr, "-c", "20", "-p", "7201"},
			[]string{"create id", "resolve addr", "resolve route", "create qp", "connect", "disconnect", "destroy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := rdmatest.RXECounts(t)
			srvOut, srvDone, srv := startCmd(t, env, tc.server)
			awaitListener(t, base)
			cliOut, cliDone, _ := startCmd(t, env, tc.client)
			select {
			case err := <-cliDone:
				if err != nil {
					t.Fatalf("client: %v\n%s\nserver:\n%s", err, cliOut, srvOut)
				}
			case <-time.After(time.Minute):
				t.Fatalf("the client did not end in a minute:\n%s\nserver:\n%s", cliOut, srvOut)
			}
			out := cliOut.String()
			t.Logf("client:\n%s", out)
			if strings.Contains(out, "RDMA_CM_EVENT") || strings.Contains(out, "fail") {
				t.Errorf("the client reports a failure:\n%s", out)
			}
			for _, step := range tc.rows {
				if !row(step).MatchString(out) {
					t.Errorf("the client's report has no %q row:\n%s", step, out)
				}
			}
			if tc.server[0] != goverbsBin {
				return
			}
			srv.Process.Signal(syscall.SIGINT)
			select {
			case err := <-srvDone:
				if err != nil {
					t.Errorf("server: %v\n%s", err, srvOut)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("the server did not end on SIGINT:\n%s", srvOut)
			}
			if got, want := srvOut.String(), "20 connections served\n"; got != want {
				t.Errorf("server printed %q, want %q", got, want)
			}
		})
	}
}
