package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goverbs/goverbs/test/vm/internal/plan"
)

var flagQemuStats = flag.Bool("qemustats", false, "print how QEMU's own counters (its 'info jit': emulated-TLB flushes, translated blocks, invalidations) moved over each step, read from a monitor socket; for telling what a step costs the emulator (bench mode with -benchkprof, say)")

// qemuStats reads QEMU's translator counters from its monitor, a unix
// socket given with -monitor, at the start and end of each step of the
// plan as the console shows them, and reports how they moved. Under TCG
// an emptied TLB or translation cache costs every instruction after it
// until refilled, which no guest-side measure sees.
type qemuStats struct {
	sock  string
	conn  net.Conn
	r     *bufio.Reader
	start map[string]map[string]int64 // step → counters when it began
}

// newQemuStats returns the stats reader and the arguments that give QEMU
// its monitor socket, in dir.
func newQemuStats(dir string) (*qemuStats, []string) {
	sock := filepath.Join(dir, "monitor.sock")
	return &qemuStats{sock: sock, start: map[string]map[string]int64{}},
		[]string{"-monitor", "unix:" + sock + ",server=on,wait=off"}
}

// infoJitRow is one counter line of "info jit".
var infoJitRow = regexp.MustCompile(`(?m)^(TB count|TB flush count|TB invalidate count|TLB full flushes|TLB partial flushes|TLB elided flushes)\s+(\d+)`)

// read asks the monitor for "info jit"; nil if it cannot.
func (q *qemuStats) read() map[string]int64 {
	if q.conn == nil {
		c, err := net.DialTimeout("unix", q.sock, time.Second)
		if err != nil {
			return nil
		}
		q.conn, q.r = c, bufio.NewReader(c)
		if _, err := q.until(); err != nil { // the greeting
			q.close()
			return nil
		}
	}
	if _, err := q.conn.Write([]byte("info jit\n")); err != nil {
		q.close()
		return nil
	}
	out, err := q.until()
	if err != nil {
		q.close()
		return nil
	}
	m := map[string]int64{}
	for _, s := range infoJitRow.FindAllStringSubmatch(strings.ReplaceAll(out, "\r", ""), -1) {
		m[s[1]], _ = strconv.ParseInt(s[2], 10, 64)
	}
	return m
}

// until reads up to the monitor's next prompt.
func (q *qemuStats) until() (string, error) {
	_ = q.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	for !strings.HasSuffix(b.String(), "(qemu) ") {
		c, err := q.r.ReadByte()
		if err != nil {
			return b.String(), err
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

func (q *qemuStats) close() {
	if q.conn != nil {
		q.conn.Close()
		q.conn = nil
	}
}

// line looks at one console line: a step's start records the counters, a
// step's end returns how they moved over it ("" for other lines).
func (q *qemuStats) line(l string) string {
	if rest, ok := strings.CutPrefix(l, "init: === "); ok {
		name, _, _ := strings.Cut(rest, ": ")
		if m := q.read(); m != nil {
			q.start[name] = m
		}
		return ""
	}
	rest, ok := strings.CutPrefix(l, plan.MarkStep)
	if !ok {
		return ""
	}
	st := parseStep(rest)
	before, ok := q.start[st.Name]
	if !ok {
		return ""
	}
	delete(q.start, st.Name)
	after := q.read()
	if after == nil {
		return ""
	}
	return qemuStatsLine(st.Name, before, after)
}

// qemuStatsLine says how the counters moved over one step, in the order
// "info jit" prints them.
func qemuStatsLine(name string, before, after map[string]int64) string {
	var b strings.Builder
	for _, k := range []string{"TLB full flushes", "TLB partial flushes", "TLB elided flushes", "TB count", "TB flush count", "TB invalidate count"} {
		if v, ok := after[k]; ok {
			fmt.Fprintf(&b, ", %s +%d", k, v-before[k])
		}
	}
	return fmt.Sprintf("qemu: %s:%s", name, strings.TrimPrefix(b.String(), ","))
}
