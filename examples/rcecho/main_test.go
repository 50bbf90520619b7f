package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
)

// The program, run as its main would: it must succeed in the VM.
func TestRun(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	var out bytes.Buffer
	err := run(&out, "rxe0", 5)
	t.Logf("output:\n%s", &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "5 messages echoed") {
		t.Errorf("output lacks its last line")
	}
}
