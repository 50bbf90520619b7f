package rdmacm

import (
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

func TestAckTimeoutExponent(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want uint8
	}{
		{0, 0}, {4096 * time.Nanosecond, 0}, {4097 * time.Nanosecond, 1},
		{16 * time.Millisecond, 12}, {17 * time.Millisecond, 13}, {time.Hour, 30}, {100 * time.Hour, 31},
	} {
		if got := ackTimeoutExponent(c.d); got != c.want {
			t.Errorf("ackTimeoutExponent(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// Config.AckTimeout reaches the QP (its timeout attribute), and a peer
// that stops answering fails the connection's next request with a retry
// error within (RetryCount+1) × the timeout: 4 × 4.096 µs × 2^12, about
// 67 ms, here. The dead peer is the accepted side's QP moved to the error
// state, which drops what arrives without an answer.
func TestAckTimeout(t *testing.T) {
	requireCM(t)
	const ack, retries = 16 * time.Millisecond, 3
	l := listen(t, 45, &Config{AckTimeout: ack})
	cli, srv := pair(t, l, &Config{AckTimeout: ack, RetryCount: retries})
	n := ackTimeoutExponent(ack)
	for _, c := range []*Conn{cli, srv} {
		a, err := c.QP().Query(uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt)
		if err != nil {
			t.Fatal(err)
		}
		if a.Timeout != n {
			t.Errorf("QP timeout %d, want %d", a.Timeout, n)
		}
	}
	buf := newBuffer(t, srv, 4096)
	if err := srv.QP().Modify(&uverbs.QPAttr{State: uverbs.QPErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	src := newBuffer(t, cli, 4096)
	start := time.Now()
	if _, err := cli.QP().PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{src.sge(t, 0, 8)}, RemoteAddr: buf.mr.Addr(), RKey: buf.mr.RKey()}}); err != nil {
		t.Fatal(err)
	}
	w := poll(t, cli, 1)[0]
	took := time.Since(start)
	bound := time.Duration(retries+1) * (4096 * time.Nanosecond << n)
	t.Logf("a write to a dead peer failed (%v) after %v; the bound is %v", w.Status, took, bound)
	if w.Status != cq.RetryExcErr {
		t.Errorf("write to a dead peer: %v, want %v", w.Status, cq.RetryExcErr)
	}
	// Far above the bound, for slow emulated guests, and far below the
	// CM's own timeout's seconds.
	if took > 10*bound+time.Second {
		t.Errorf("the failure took %v, the bound is %v", took, bound)
	}
}
