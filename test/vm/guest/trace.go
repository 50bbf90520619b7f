//go:build linux

package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
)

// Traced kernel events: tracefs's own ring buffer records every event
// of the named kinds (such as "sched/sched_switch") on every CPU over a
// step, with a clock the CPUs share, and /init writes the text of the
// trace, gzipped, where the step says. It answers what a profile cannot:
// the order of things, such as how long a woken kernel worker waited for
// a CPU that a poller held, and whose runqueue it waited on.

// traceBufferKB is the ring buffer's size per CPU: a latency pair of
// 20,000 iterations makes a few hundred thousand scheduler events.
const traceBufferKB = 65536

type trace struct {
	irqs map[string]int64 // /proc/interrupts and /proc/stat's ctxt at start
}

// traceEnabled is the events enabled so far. An event stays enabled once
// it is, for later steps, which only turn recording on and off: enabling
// one patches kernel text, and under QEMU's TCG that panicked the guest
// (an int3 where the other CPU ran the patched code). The harness enables
// them on the kernel's command line (trace_event=), before the second CPU
// starts, and writing 1 to an enabled event's switch patches nothing.
var traceEnabled = map[string]bool{}

// startTrace sets up the ring buffer, clears it, enables the events and
// turns recording on. An event the kernel does not have is reported and
// left out.
func startTrace(events []string) (*trace, error) {
	if err := mountTracefs(); err != nil {
		return nil, err
	}
	for _, w := range []struct{ file, val string }{
		{"tracing_on", "0"},
		{"trace_clock", "mono"}, // one clock for every CPU: events of two CPUs compare
		{"buffer_size_kb", fmt.Sprint(traceBufferKB)},
		{"options/record-tgid", "1"}, // each line tells the thread's process
		{"trace", ""},                // truncating it empties the buffer
	} {
		if err := os.WriteFile(tracefs+"/"+w.file, []byte(w.val), 0); err != nil {
			return nil, fmt.Errorf("tracefs %s: %w", w.file, err)
		}
	}
	for _, e := range events {
		if _, done := traceEnabled[e]; done {
			continue
		}
		err := os.WriteFile(tracefs+"/events/"+e+"/enable", []byte("1"), 0)
		if err != nil {
			fmt.Printf("init: trace event %s: %v\n", e, err)
		}
		traceEnabled[e] = err == nil
	}
	t := &trace{irqs: readInterrupts()}
	if err := os.WriteFile(tracefs+"/tracing_on", []byte("1"), 0); err != nil {
		return nil, fmt.Errorf("tracefs tracing_on: %w", err)
	}
	return t, nil
}

// stop stops recording, prints how the interrupts moved over the step,
// writes the trace's text gzipped to out, prints how much there was and
// shrinks the buffer.
func (t *trace) stop(name, out string) {
	_ = os.WriteFile(tracefs+"/tracing_on", []byte("0"), 0)
	printCounters(name+": interrupts", t.irqs, readInterrupts())
	if err := writeTrace(out); err != nil {
		fmt.Printf("init: %s: trace: %v\n", name, err)
	}
	if b, err := os.ReadFile(tracefs + "/per_cpu/cpu0/stats"); err == nil {
		fmt.Printf("init: %s: trace cpu0 stats: %q\n", name, b)
	}
	_ = os.WriteFile(tracefs+"/trace", nil, 0)
	_ = os.WriteFile(tracefs+"/buffer_size_kb", []byte("1"), 0)
}

func writeTrace(out string) error {
	in, err := os.Open(tracefs + "/trace")
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	n, err := io.Copy(zw, in)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		fmt.Printf("init: trace: %d bytes of text into %s\n", n, out)
	}
	return err
}
