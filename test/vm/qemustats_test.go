package main

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/test/vm/internal/plan"
)

// fakeMonitor answers "info jit" as QEMU 7.2's monitor does, with the TLB
// flush count growing by 5 each time.
func fakeMonitor(t *testing.T, sock string) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprint(c, "QEMU 7.2.22 monitor - type 'help' for more information\r\n(qemu) ")
		r := bufio.NewReader(c)
		flushes := 100
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if strings.TrimSpace(l) != "info jit" {
				fmt.Fprint(c, "unknown command\r\n(qemu) ")
				continue
			}
			flushes += 5
			fmt.Fprintf(c, "info jit\r\nTranslation buffer state:\r\nTB count            3174\r\n\r\nStatistics:\r\n"+
				"TB flush count      0\r\nTB invalidate count 1517\r\nTLB full flushes    0\r\nTLB partial flushes %d\r\nTLB elided flushes  %d\r\n(qemu) ", flushes, 2*flushes)
		}
	}()
}

func TestQemuStats(t *testing.T) {
	q, args := newQemuStats(t.TempDir())
	defer q.close()
	if len(args) != 2 || args[0] != "-monitor" || !strings.HasSuffix(args[1], ",server=on,wait=off") {
		t.Fatalf("monitor arguments %q", args)
	}
	fakeMonitor(t, q.sock)
	if got := q.line("init: === kprof write_bw go client: /bin/goverbs perf -t write_bw"); got != "" {
		t.Errorf("a step's start printed %q", got)
	}
	if got := q.line("some output"); got != "" {
		t.Errorf("another line printed %q", got)
	}
	got := q.line(plan.MarkStep + "kprof write_bw go client rc=0 took=4.2s")
	want := "qemu: kprof write_bw go client: TLB full flushes +0, TLB partial flushes +5, TLB elided flushes +10, TB count +0, TB flush count +0, TB invalidate count +0"
	if got != want {
		t.Errorf("step end:\n got %q\nwant %q", got, want)
	}
	// A step whose start it did not see, and a monitor that is gone, print nothing.
	if got := q.line(plan.MarkStep + "other rc=0 took=1s"); got != "" {
		t.Errorf("unknown step printed %q", got)
	}
	gone, _ := newQemuStats(t.TempDir())
	gone.line("init: === x: y")
	if got := gone.line(plan.MarkStep + "x rc=0 took=1s"); got != "" {
		t.Errorf("no monitor printed %q", got)
	}
}
