package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/ucma"
)

// The program, run as its main would, on rxe0's 192.0.2.1: a GET, then
// 1,000 POSTs of random sizes from 4 clients at once, every echo checked.
// It must succeed in the VM.
//
// Issue #40 asks for bodies up to 1 MiB. Under QEMU's TCG that moves
// about 500 MiB each way and takes 70 s to 150 s in the 6.1/amd64 VM
// (host load), so make test sends bodies up to 128 KiB; GOVERBS_RDMAHTTP_MAX
// sets the largest, in bytes, for the full size:
//
//	go run ./test/vm -vms 6.1/amd64 -pkg ./examples/rdmahttp/ \
//		-env GOVERBS_RDMAHTTP_MAX=1048576 test
func TestRun(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.RequireDevice(t, ucma.DevicePath)
	n := 1000
	if testutil.Race { // the race detector's run checks the concurrency, not the volume
		n = 250
	}
	maxBody := 128 << 10
	if s := os.Getenv("GOVERBS_RDMAHTTP_MAX"); s != "" {
		var err error
		if maxBody, err = strconv.Atoi(s); err != nil || maxBody < 0 {
			t.Fatalf("GOVERBS_RDMAHTTP_MAX=%q: want a number of bytes", s)
		}
	}
	var out bytes.Buffer
	err := run(&out, "192.0.2.1:0", n, maxBody, 4)
	t.Logf("output:\n%s", &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "hello over rdma: 192.0.2.1:") {
		t.Errorf("output lacks the GET's response")
	}
	if !strings.Contains(out.String(), fmt.Sprintf("%d POSTs echoed", n)) {
		t.Errorf("output lacks its last line")
	}
}
