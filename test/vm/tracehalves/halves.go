package main

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// event is one line of the trace.
type event struct {
	us   float64 // timestamp, µs
	cpu  int
	comm string
	pid  int
	name string // sched_switch, workqueue_queue_work, …
	kv   map[string]string
}

// "comm-pid (tgid) [cpu] flags ts: name: fields"; the tgid only with
// the record-tgid option.
var lineRE = regexp.MustCompile(`^\s*(.+?)-(\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(\d+)\]\s+\S+\s+([\d.]+):\s+(\w+):\s*(.*)$`)

var kvRE = regexp.MustCompile(`(\w+)=(\S+)`)

func readTrace(path string) ([]event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r = zr
	}
	return parseTrace(r)
}

func parseTrace(r io.Reader) ([]event, error) {
	var evs []event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[2])
		cpu, _ := strconv.Atoi(m[3])
		ts, _ := strconv.ParseFloat(m[4], 64)
		e := event{us: ts * 1e6, cpu: cpu, comm: m[1], pid: pid, name: m[5], kv: map[string]string{}}
		for _, f := range kvRE.FindAllStringSubmatch(m[6], -1) {
			e.kv[f[1]] = f[2]
		}
		if e.name == "workqueue_execute_start" && strings.Contains(m[6], "[rdma_rxe]") {
			e.kv["rxe"] = "1"
		}
		evs = append(evs, e)
	}
	return evs, sc.Err()
}

func isRxeWork(e *event) bool {
	return (e.name == "workqueue_queue_work" && e.kv["workqueue"] == "rxe_wq") ||
		(e.name == "workqueue_execute_start" && e.kv["rxe"] != "")
}

func isWorker(comm string) bool { return strings.HasPrefix(comm, "kworker/") }

// classes, in the order the rows give them.
var classes = []string{"local", "remote", "handoff", "multi", "other"}

// stretches of a plain local half, in order.
var stretches = []string{"post→switch", "switch→work 1", "work 1→queue 2", "queue 2→work 2", "work 2→other's post"}

type summary struct {
	halves   []float64
	class    map[string][]float64
	stretch  map[string][]float64
	nPlain   int
	pollers  []int
	warmDrop int
}

// analyze finds the two pollers (the threads outside the kernel's
// workers that queue rxe work most), cuts the middle 80 % of their posts
// into halves and classifies each.
func analyze(evs []event) (*summary, error) {
	posters := map[int]int{}
	for i := range evs {
		e := &evs[i]
		if e.name == "workqueue_queue_work" && isRxeWork(e) && !isWorker(e.comm) {
			posters[e.pid]++
		}
	}
	pids := make([]int, 0, len(posters))
	for p := range posters {
		pids = append(pids, p)
	}
	slices.SortFunc(pids, func(a, b int) int { return posters[b] - posters[a] })
	if len(pids) < 2 || posters[pids[1]] < 100 {
		return nil, errors.New("no two threads that post rxe work: not a latency pair's trace")
	}
	pollers := pids[:2]
	var posts []int
	for i := range evs {
		e := &evs[i]
		if e.name == "workqueue_queue_work" && isRxeWork(e) && slices.Contains(pollers, e.pid) {
			posts = append(posts, i)
		}
	}
	drop := len(posts) / 10 // set-up and teardown
	posts = posts[drop : len(posts)-drop]
	s := &summary{class: map[string][]float64{}, stretch: map[string][]float64{}, pollers: pollers, warmDrop: drop}
	for k := 0; k+1 < len(posts); k++ {
		a, b := posts[k], posts[k+1]
		if evs[a].pid == evs[b].pid {
			continue
		}
		s.add(evs, a, b)
	}
	if len(s.halves) == 0 {
		return nil, errors.New("no halves: the two posters never alternate")
	}
	return s, nil
}

// add classifies the half from the post at evs[a] to the other side's at
// evs[b].
func (s *summary) add(evs []event, a, b int) {
	post := &evs[a]
	dt := evs[b].us - post.us
	s.halves = append(s.halves, dt)
	var switches, works, wakes []*event
	handoff, onMine, onOther := false, false, false
	var queued2 *event
	for i := a + 1; i < b; i++ {
		e := &evs[i]
		switch e.name {
		case "sched_switch":
			switches = append(switches, e)
			if isWorker(e.kv["prev_comm"]) && isWorker(e.kv["next_comm"]) {
				handoff = true
			}
		case "sched_wakeup":
			if isWorker(e.kv["comm"]) {
				wakes = append(wakes, e)
			}
		case "workqueue_execute_start":
			if isRxeWork(e) {
				works = append(works, e)
				if e.cpu == post.cpu {
					onMine = true
				} else {
					onOther = true
				}
			}
		case "workqueue_queue_work":
			if isRxeWork(e) && isWorker(e.comm) && queued2 == nil {
				queued2 = e
			}
		}
	}
	c := "other"
	switch {
	case len(switches) >= 3:
		c = "multi"
	case handoff:
		c = "handoff"
	case len(switches) == 1 && onMine && !onOther:
		c = "local"
	case onOther && !onMine:
		c = "remote"
	}
	s.class[c] = append(s.class[c], dt)
	// The plain local half: the poster's doorbell wakes a worker (the
	// wakeup before the switch), the worker does two items and wakes no
	// other.
	if c != "local" || len(works) != 2 || len(wakes) != 1 || queued2 == nil {
		return
	}
	sw := switches[0]
	s.nPlain++
	for i, v := range []float64{sw.us - post.us, works[0].us - sw.us, queued2.us - works[0].us,
		works[1].us - queued2.us, evs[b].us - works[1].us} {
		s.stretch[stretches[i]] = append(s.stretch[stretches[i]], v)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	w := slices.Clone(v)
	slices.Sort(w)
	return w[len(w)/2]
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

func (s *summary) format(path string) string {
	var b strings.Builder
	n := float64(len(s.halves))
	fmt.Fprintf(&b, "%-28s halves %6d  median %5.1f  mean %5.1f µs |", filepath.Base(path), len(s.halves), median(s.halves), mean(s.halves))
	for _, c := range classes {
		v := s.class[c]
		if c == "other" && len(v) == 0 {
			continue
		}
		fmt.Fprintf(&b, " %s %4.1f%% %5.1f |", c, 100*float64(len(v))/n, median(v))
	}
	fmt.Fprintf(&b, "\n    plain local halves %d (%.1f%%), median/mean µs:", s.nPlain, 100*float64(s.nPlain)/n)
	for _, st := range stretches {
		fmt.Fprintf(&b, " %s %.0f/%.2f;", st, median(s.stretch[st]), mean(s.stretch[st]))
	}
	b.WriteString("\n")
	return b.String()
}
