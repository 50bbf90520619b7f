package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
)

// TestCLIMckey runs goverbs mckey against itself over rxe0's 192.0.2.1:
// a receiver and a send-only sender of one IPv4 group, 20 datagrams.
func TestCLIMckey(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.RequireDevice(t, "/dev/infiniband/rdma_cm")
	testutil.CheckFDLeak(t)
	defer func(w time.Duration) { mckeyWait = w }(mckeyWait)
	mckeyWait = 200 * time.Millisecond // the receiver joins first; no subnet manager to wait for
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"-m", "239.1.2.6", "-b", "192.0.2.1", "-C", "20", "-S", "64"}
	var rOut, rErr bytes.Buffer
	rDone := make(chan int, 1)
	go func() { rDone <- mckeyTo(ctx, &rOut, &rErr, args) }()
	time.Sleep(500 * time.Millisecond) // the receiver's join before the sender's datagrams
	var sOut, sErr bytes.Buffer
	if st := mckeyTo(ctx, &sOut, &sErr, append([]string{"-so"}, args...)); st != 0 {
		t.Fatalf("sender: status %d\n%s%s", st, sOut.String(), sErr.String())
	}
	if st := <-rDone; st != 0 {
		t.Fatalf("receiver: status %d\n%s%s", st, rOut.String(), rErr.String())
	}
	t.Logf("sender:\n%s\nreceiver:\n%s", sOut.String(), rOut.String())
	for _, o := range []string{sOut.String(), rOut.String()} {
		for _, want := range []string{"mckey: joined dgid: ::ffff:239.1.2.6 mlid 0x0 sl 0\n", "data transfers complete\n", "return status 0\n"} {
			if !strings.Contains(o, want) {
				t.Errorf("output without %q:\n%s", want, o)
			}
		}
	}
}
