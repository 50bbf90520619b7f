package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
)

// BenchmarkPollDrainTouched is PollDrain at batch 64 with one change: before
// each timed drain, outside the timer, every page of the process's uverbs
// mappings (the rings) is read once. The difference to PollDrain is what
// the first touch of a ring page costs inside the drain (under TCG, the
// emulated TLB's refills: a drain of 256 CQEs walks four new 4 KiB pages
// of rxe's ring, since the ring moves on with every round). It is an
// experiment for docs/PERFORMANCE-LOG.md, not a figure of the tables.
func BenchmarkPollDrainTouched(b *testing.B) {
	e := setup(b)
	maps := uverbsMappings(b)
	wrs := e.write(256)
	wcs := make([]cq.WC, 64)
	settle := 2 * time.Millisecond
	e.fill(b, wrs, settle)
	rdmatest.PollN(b, e.scq, len(wrs))
	var cqes, rounds, dirty int
	var took time.Duration
	for b.Loop() {
		for took < 100*time.Millisecond && rounds < 500 {
			e.fill(b, wrs, settle)
			touch(maps)
			empty := false
			start := time.Now()
			for got := 0; got < len(wrs); {
				n, err := e.scq.Poll(wcs)
				if err != nil {
					b.Fatal(err)
				}
				empty = empty || n == 0
				got += n
			}
			d := time.Since(start)
			rounds++
			if empty {
				dirty++
				settle = min(2*settle, 64*time.Millisecond)
				continue
			}
			took += d
			cqes += len(wrs)
		}
	}
	if cqes > 0 {
		b.ReportMetric(float64(took.Nanoseconds())/float64(cqes), "ns/CQE")
	}
	if dirty > 0 {
		b.Logf("%d of %d rounds found the CQ empty and were left out", dirty, rounds)
	}
}

// uverbsMappings returns the address ranges of this process's mappings of
// /dev/infiniband/uverbs* (/proc/self/maps): rxe's rings.
func uverbsMappings(b *testing.B) (r [][2]uintptr) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := s.Text()
		if !strings.Contains(l, "/dev/infiniband/uverbs") {
			continue
		}
		lo, hi, _ := strings.Cut(strings.Fields(l)[0], "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		z, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			b.Fatalf("/proc/self/maps: %q", l)
		}
		r = append(r, [2]uintptr{uintptr(a), uintptr(z)})
	}
	if len(r) == 0 {
		b.Fatal("no uverbs mappings in /proc/self/maps")
	}
	return r
}

var touched uint64

// touch reads one byte of every 64 in the mappings: every page, and every
// cache line, once.
func touch(maps [][2]uintptr) {
	var s uint64
	for _, m := range maps {
		// The address of a mapping, not of Go memory: its bits are
		// reinterpreted, the form vet accepts.
		base := *(*unsafe.Pointer)(unsafe.Pointer(&m[0]))
		mem := unsafe.Slice((*byte)(base), m[1]-m[0])
		for i := 0; i < len(mem); i += 64 {
			s += uint64(mem[i])
		}
	}
	touched += s
}
