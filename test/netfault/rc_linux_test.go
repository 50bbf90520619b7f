package netfault

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/uverbs"
)

// streamMsgs is how many messages a stream of scenario 1 carries:
// GOVERBS_NETFAULT_MSGS (the full figure is 200,000), else dflt,
// which keeps each stream to seconds under TCG.
func streamMsgs(t *testing.T, dflt int) int {
	if s := os.Getenv("GOVERBS_NETFAULT_MSGS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("GOVERBS_NETFAULT_MSGS=%q: want a count", s)
		}
		return n
	}
	return dflt
}

// stream is RC traffic from host A to host B: n messages, as SENDs into
// B's posted receives or as RDMA WRITEs with immediate data (the
// message's number) into B's buffer, slots messages at most in flight.
// Message k is msgLen(k) bytes of fill(k): its number, its length and
// bytes that follow from the number, so B checks every byte it got.
type stream struct {
	op    uverbs.WROpcode // WRSend or WRRDMAWriteWithImm
	n     int
	slots int
	max   int // the largest message, and a slot's size
	// hook, if set, runs on A's goroutine just before message hookAt is
	// posted: a fault in the middle of the traffic.
	hookAt int
	hook   func()
	// recvDelay holds B's first receives back: the sender meets RNR NAKs.
	recvDelay time.Duration
}

func (s stream) msgLen(k int) int { return 16 + int(uint32(k)*2654435761)%(s.max-15) }

// fill writes message k into b (len(b) == msgLen(k)).
func fill(k int, b []byte) {
	binary.LittleEndian.PutUint64(b, uint64(k))
	binary.LittleEndian.PutUint64(b[8:], uint64(len(b)))
	x := uint64(k)*0x9e3779b97f4a7c15 | 1
	for i := 16; i < len(b); i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

// run sends the stream from a to b, connected, and checks it: at B each
// message arrives once, in order and intact; at A each send completes
// once, in order, successfully; neither side gets a completion more. It
// returns how long the stream took.
func (s stream) run(t *testing.T, a, b *rcEnd) time.Duration {
	t.Helper()
	took, errA, errB := s.try(a, b)
	if errA != nil || errB != nil {
		dumpNet(t)
		t.Fatalf("%d %v messages of up to %d bytes:\nhost A: %v\nhost B: %v", s.n, s.op, s.max, errA, errB)
	}
	// Nothing more comes: no completion beyond the ones posted.
	time.Sleep(50 * time.Millisecond)
	buf := make([]cq.WC, 4)
	for _, q := range []*cq.CQ{a.scq, a.rcq, b.scq, b.rcq} {
		if n, err := q.Poll(buf); err != nil || n != 0 {
			t.Errorf("a completion more after the stream: %+v %v", buf[:n], err)
		}
	}
	return took
}

// broken is how a stream ends at host A when its QP fails: the first
// send that completed in error, and its status; every send after it
// flushed, each once, in order.
type broken struct {
	at     int
	status cq.Status
}

func (e *broken) Error() string {
	return fmt.Sprintf("send %d completed with %q, and every later one flushed", e.at, e.status)
}

// cut is how a stream ends at host B when host A's QP failed: the
// messages that arrived (each once, in order, intact) before nothing more
// came.
type cut struct{ got int }

func (e *cut) Error() string { return fmt.Sprintf("host A failed after %d messages arrived", e.got) }

// try runs the stream as run does and returns host A's and host B's
// errors: a *broken and a *cut when A's QP failed and each side
// checked what it saw.
func (s stream) try(a, b *rcEnd) (took time.Duration, errA, errB error) {
	// credit is how many messages B has checked; B has a receive posted
	// for each of the slots after them. It starts at -slots: nothing is
	// posted until B says so.
	var credit atomic.Int64
	credit.Store(-int64(s.slots))
	var failed atomic.Bool // A's QP failed: B stops once nothing more comes
	start := time.Now()
	deadline := start.Add(5*time.Minute + time.Duration(s.n)*time.Millisecond)
	errA, errB = both(func() error {
		err := s.send(a, b, &credit, deadline)
		failed.Store(err != nil)
		return err
	}, func() error { return s.receive(b, &credit, &failed, deadline) })
	return time.Since(start), errA, errB
}

func (s stream) send(a, b *rcEnd, credit *atomic.Int64, deadline time.Time) error {
	mem := a.buf.Bytes()
	wcs := make([]cq.WC, 32)
	posted, done := 0, 0
	var fail *broken
	for done < s.n {
		for fail == nil && posted < s.n && posted-done < s.slots && int64(posted) < credit.Load()+int64(s.slots) {
			if posted == s.hookAt && s.hook != nil {
				s.hook()
			}
			off, n := posted%s.slots*s.max, s.msgLen(posted)
			fill(posted, mem[off:off+n])
			sge, err := a.mr.SGE(off, n)
			if err != nil {
				return err
			}
			wr := uverbs.SendWR{WRID: uint64(posted), Opcode: s.op, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge}}
			if s.op == uverbs.WRRDMAWriteWithImm {
				wr.Imm, wr.RemoteAddr, wr.RKey = uint32(posted), b.mr.Addr()+uint64(off), b.mr.RKey()
			}
			if _, err := a.qp.PostSend([]uverbs.SendWR{wr}); err != nil {
				return fmt.Errorf("post message %d: %w", posted, err)
			}
			posted++
		}
		k, err := a.scq.Poll(wcs)
		if err != nil {
			return err
		}
		for _, wc := range wcs[:k] {
			switch {
			case wc.WRID != uint64(done):
				return fmt.Errorf("send completion %d of %d is wr_id %d, %q: out of order", done, s.n, wc.WRID, wc.Status)
			case fail == nil && wc.Status != cq.Success:
				fail = &broken{done, wc.Status}
			case fail != nil && wc.Status != cq.WRFlushErr:
				return fmt.Errorf("send %d after the QP failed at send %d: %q, want a flush", done, fail.at, wc.Status)
			}
			done++
		}
		if fail != nil && done == posted {
			return fail
		}
		if k == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d sends completed by the deadline (%d posted)", done, s.n, posted)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return nil
}

func (s stream) receive(b *rcEnd, credit *atomic.Int64, failed *atomic.Bool, deadline time.Time) error {
	mem := b.buf.Bytes()
	post := func(k int) error {
		wr := uverbs.RecvWR{WRID: uint64(k)}
		if s.op == uverbs.WRSend {
			sge, err := b.mr.SGE(k%s.slots*s.max, s.max)
			if err != nil {
				return err
			}
			wr.SGL = []uverbs.SGE{sge}
		}
		_, err := b.qp.PostRecv([]uverbs.RecvWR{wr})
		return err
	}
	if s.recvDelay > 0 {
		credit.Store(0) // let the sender go before the receives are there
		time.Sleep(s.recvDelay)
	}
	for k := 0; k < min(s.slots, s.n); k++ {
		if err := post(k); err != nil {
			return err
		}
	}
	credit.Store(0)
	wantOp := cq.OpRecv
	if s.op == uverbs.WRRDMAWriteWithImm {
		wantOp = cq.OpRecvRDMAWithImm
	}
	want := make([]byte, s.max)
	wcs := make([]cq.WC, 32)
	var idle time.Time // since when nothing came, once A failed
	for next := 0; next < s.n; {
		k, err := b.rcq.Poll(wcs)
		if err != nil {
			return err
		}
		for _, wc := range wcs[:k] {
			n := s.msgLen(next)
			if wc.Status != cq.Success || wc.WRID != uint64(next) || wc.Opcode != wantOp || int(wc.ByteLen) != n {
				return fmt.Errorf("receive %d: %+v, want wr_id %d, %v, %d bytes", next, wc, next, wantOp, n)
			}
			if s.op == uverbs.WRRDMAWriteWithImm && (wc.Flags&cq.WithImm == 0 || wc.Imm != uint32(next)) {
				return fmt.Errorf("receive %d: immediate data %d (flags %v), want the message's number", next, wc.Imm, wc.Flags)
			}
			off := next % s.slots * s.max
			fill(next, want[:n])
			if got := mem[off : off+n]; !bytes.Equal(got, want[:n]) {
				i := 0
				for got[i] == want[i] {
					i++
				}
				return fmt.Errorf("message %d (%d bytes) differs from byte %d: % x, want % x", next, n, i, got[i:min(i+16, n)], want[i:min(i+16, n)])
			}
			if next+s.slots < s.n {
				if err := post(next + s.slots); err != nil {
					return err
				}
			}
			next++
			credit.Store(int64(next))
		}
		if k > 0 {
			idle = time.Time{}
			continue
		}
		switch {
		case time.Now().After(deadline):
			return fmt.Errorf("%d of %d messages arrived by the deadline", next, s.n)
		case !failed.Load():
		case idle.IsZero():
			idle = time.Now()
		case time.Since(idle) > 200*time.Millisecond:
			return &cut{next}
		}
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// rxeCounters reads an rxe device's hardware counters.
func rxeCounters(t *testing.T, dev string) map[string]uint64 {
	t.Helper()
	dir := "/sys/class/infiniband/" + dev + "/ports/1/hw_counters/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, e := range ents {
		b, err := os.ReadFile(dir + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()], _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	return m
}

// countersSince is what moved in dev's counters since before, as text.
func countersSince(t *testing.T, dev string, before map[string]uint64) (map[string]uint64, string) {
	t.Helper()
	d := map[string]uint64{}
	var s []string
	for k, v := range rxeCounters(t, dev) {
		if v != before[k] {
			d[k] = v - before[k]
			s = append(s, fmt.Sprintf("%s=%d", k, d[k]))
		}
	}
	sort.Strings(s)
	return d, dev + ": " + strings.Join(s, " ")
}

// Scenario 1: RC streams, SENDs and RDMA WRITEs with immediate data,
// across a link that loses 1 %, 5 % or 20 % of the packets each way,
// duplicates 1 %, reorders a quarter, or delays them 10 ms ± 5 ms.
// rxe's go-back-N retransmission hides all of it: every message arrives
// once, in order, every byte right, and every send completes once,
// successfully. The retry count is rdma-core's default, 7, which rxe
// never exhausts; the counters show the faults were there (sequence
// errors and retries under loss, duplicate requests under duplication).
//
// Each fault has its own count of messages in make test, sized by what
// it costs under TCG: at 20 % loss, and with a jitter that reorders
// packets, go-back-N resends tens of packets for each one delivered.
func TestStreamsThroughFaults(t *testing.T) {
	requireTwoHosts(t)
	for _, c := range []struct {
		name  string
		netem netlink.Netem
		msgs  int
	}{
		{"loss1%", netlink.Netem{Loss: 0.01}, 1000},
		{"loss5%", netlink.Netem{Loss: 0.05}, 500},
		{"loss20%", netlink.Netem{Loss: 0.20}, 100},
		{"duplicate1%", netlink.Netem{Duplicate: 0.01}, 1000},
		{"reorder25%", netlink.Netem{Delay: 2 * time.Millisecond, Reorder: 0.25}, 150},
		{"delay10ms±5ms", netlink.Netem{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond}, 50},
	} {
		n := streamMsgs(t, c.msgs)
		for _, op := range []uverbs.WROpcode{uverbs.WRSend, uverbs.WRRDMAWriteWithImm} {
			t.Run(c.name+"/"+opName(op), func(t *testing.T) {
				s := stream{op: op, n: n, slots: 32, max: 4096}
				a, b := openRC(t, hostA, s.slots*s.max, 64), openRC(t, hostB, s.slots*s.max, 64)
				connectRC(t, a, b, 1, uverbs.ConnectOptions{})
				before0, before1 := rxeCounters(t, "rxe0"), rxeCounters(t, "rxe1")
				<-schedule(t, impair(0, hostA, c.netem), impair(0, hostB, c.netem))
				took := s.run(t, a, b)
				<-schedule(t, repair(0, hostA), repair(0, hostB))
				d0, s0 := countersSince(t, "rxe0", before0)
				d1, s1 := countersSince(t, "rxe1", before1)
				t.Logf("%d messages of 16 to %d bytes in %v, every one once, in order, intact\n%s\n%s", n, s.max, took.Round(time.Millisecond), s0, s1)
				switch {
				case c.netem.Loss > 0 && d1["out_of_seq_request"]+d0["completer_retry_err"]+d0["rcvd_seq_err"] == 0:
					t.Errorf("%v loss, and rxe counted no sequence error and no retry", c.netem.Loss)
				case c.netem.Duplicate > 0 && n >= 1000 && d1["duplicate_request"]+d0["duplicate_request"] == 0:
					t.Errorf("1 %% duplication of %d messages, and rxe counted no duplicate request", n)
				}
			})
		}
	}
}

func opName(op uverbs.WROpcode) string {
	if op == uverbs.WRSend {
		return "send"
	}
	return "write_imm"
}
