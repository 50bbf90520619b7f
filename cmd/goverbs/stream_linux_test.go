package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
)

// TestCLIStream runs goverbs stream against itself over rxe0's
// 192.0.2.1, on rdmanet and on TCP (-T s): a custom latency run and a
// custom bandwidth run each, every row in rstream's format.
func TestCLIStream(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.RequireDevice(t, "/dev/infiniband/rdma_cm")
	testutil.CheckFDLeak(t)
	row := regexp.MustCompile(`^name +bytes +xfers +iters +total +time +Gb/sec +usec/xfer\ncustom +\S+ +\S+ +\S+ +\S+ +\d+\.\d\ds +\d+\.\d\d +\d+\.\d\d\n$`)
	port := 7290
	for _, mode := range [][]string{nil, {"-T", "s"}} {
		for _, run := range [][]string{{"-S", "64", "-C", "1", "-I", "200"}, {"-S", "64k", "-C", "50", "-I", "2"}} {
			port++
			args := append(append([]string{"-p", strconv.Itoa(port)}, mode...), run...)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			var srvOut, srvErr bytes.Buffer
			srvDone := make(chan int, 1)
			go func() { srvDone <- streamTo(ctx, &srvOut, &srvErr, append([]string{"-b", "192.0.2.1"}, args...)) }()
			var out, errOut bytes.Buffer
			st := 1
			for i := 0; i < 50 && st != 0; i++ { // until the server listens
				time.Sleep(100 * time.Millisecond)
				out.Reset()
				errOut.Reset()
				st = streamTo(ctx, &out, &errOut, append([]string{"-s", "192.0.2.1"}, args...))
			}
			srvSt := <-srvDone
			cancel()
			if st != 0 || srvSt != 0 {
				t.Fatalf("%q: client status %d: %s%s\nserver status %d: %s%s", args, st, out.String(), errOut.String(), srvSt, srvOut.String(), srvErr.String())
			}
			t.Logf("%q:\n%s", args, out.String())
			for side, o := range map[string]string{"client": out.String(), "server": srvOut.String()} {
				if !row.MatchString(o) {
					t.Errorf("%q: the %s's report:\n%s", args, side, o)
				}
			}
		}
	}
}
