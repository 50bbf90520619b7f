package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// syntheticTrace writes n alternating halves between two pollers (pids
// 10 on CPU 0 and 20 on CPU 1): the even ones plain local halves whose
// stretches are 1, 2, 3, 4 and 5 µs (15 in all), the odd ones multi
// halves of 40 µs with three switches.
func syntheticTrace(n int) string {
	var b strings.Builder
	b.WriteString("# tracer: nop\n")
	t := 100.0
	line := func(comm string, pid, cpu int, name, rest string) {
		fmt.Fprintf(&b, "%16s-%-7d (%7d) [%03d] d..2. %12.6f: %s: %s\n", comm, pid, pid, cpu, t/1e6, name, rest)
	}
	q := "work struct=00000000aa function=do_work [rdma_rxe] workqueue=rxe_wq req_cpu=8192 cpu=-1"
	x := "work struct 00000000aa: function do_work [rdma_rxe]"
	for i := range n {
		me, cpu := 10, 0
		if i%2 == 1 {
			me, cpu = 20, 1
		}
		line("poller", me, cpu, "workqueue_queue_work", q)
		if i%2 == 0 {
			line("poller", me, cpu, "sched_wakeup", "comm=kworker/u8:1 pid=5 prio=120 target_cpu=000")
			t++
			line("poller", me, cpu, "sched_switch", fmt.Sprintf("prev_comm=poller prev_pid=%d prev_prio=120 prev_state=R ==> next_comm=kworker/u8:1 next_pid=5 next_prio=120", me))
			t += 2
			line("kworker/u8:1", 5, cpu, "workqueue_execute_start", x)
			t += 3
			line("kworker/u8:1", 5, cpu, "workqueue_queue_work", q)
			t += 4
			line("kworker/u8:1", 5, cpu, "workqueue_execute_start", x)
			t += 5
		} else {
			for k := range 3 {
				line("poller", me, k%2, "sched_switch", "prev_comm=poller prev_pid=1 prev_prio=120 prev_state=R ==> next_comm=kworker/u8:1 next_pid=5 next_prio=120")
				t += 10
			}
			t += 10
		}
	}
	return b.String()
}

func TestAnalyze(t *testing.T) {
	evs, err := parseTrace(strings.NewReader(syntheticTrace(1000)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := analyze(evs)
	if err != nil {
		t.Fatal(err)
	}
	// The middle 80 %: 800 posts, 799 halves.
	if len(s.halves) != 799 {
		t.Errorf("%d halves, want 799", len(s.halves))
	}
	got := map[string]int{}
	for c, v := range s.class {
		got[c] = len(v)
	}
	if d := cmp.Diff(map[string]int{"local": 400, "multi": 399}, got); d != "" {
		t.Errorf("classes (-want +got):\n%s", d)
	}
	if m := median(s.class["local"]); m < 14.99 || m > 15.01 {
		t.Errorf("local halves' median %v µs, want 15", m)
	}
	if s.nPlain != 400 {
		t.Errorf("%d plain local halves, want 400", s.nPlain)
	}
	for i, st := range stretches {
		if m := mean(s.stretch[st]); m < float64(i+1)-0.01 || m > float64(i+1)+0.01 {
			t.Errorf("stretch %s: mean %v µs, want %d", st, m, i+1)
		}
	}
	out := s.format("/x/trace-send_lat-go1.txt.gz")
	for _, want := range []string{"trace-send_lat-go1.txt.gz", "local 50.1%", "multi 49.9%", "plain local halves 400"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestAnalyzeNotALatencyTrace(t *testing.T) {
	if _, err := analyze(nil); err == nil {
		t.Error("an empty trace analyzed without an error")
	}
}
