package netfault

import (
	"context"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// mcastMember is one receiver of the group on host B: a UDConn joined
// from B's address, with mcastSlots receives of a sequence number each.
type mcastMember struct {
	u   *rdmacm.UDConn
	buf *uverbs.Buffer
	mr  *uverbs.MR
}

const (
	mcastSlots = 64
	mcastSlot  = 128 // the GRH, then an 8-byte sequence number
)

func (m *mcastMember) setup(u *rdmacm.UDConn) (err error) {
	if m.buf, err = uverbs.AllocBuffer(mcastSlots * mcastSlot); err != nil {
		return err
	}
	if m.mr, err = u.PD().RegMR(m.buf.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return err
	}
	for i := range mcastSlots {
		if err := m.post(u, uint64(i)); err != nil {
			return err
		}
	}
	return nil
}

func (m *mcastMember) post(u *rdmacm.UDConn, slot uint64) error {
	sge, err := m.mr.SGE(int(slot)*mcastSlot, mcastSlot)
	if err != nil {
		return err
	}
	_, err = u.QP().PostRecv([]uverbs.RecvWR{{WRID: slot, SGL: []uverbs.SGE{sge}}})
	return err
}

// take returns the sequence numbers of the datagrams received so far,
// reposting each receive.
func (m *mcastMember) take(t *testing.T) []uint64 {
	t.Helper()
	var seqs []uint64
	wcs := make([]cq.WC, 16)
	for {
		n, err := m.u.CQ().Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return seqs
		}
		for _, w := range wcs[:n] {
			if w.Status != cq.Success {
				t.Fatalf("receive %+v (%v)", w, w.Status)
			}
			seqs = append(seqs, binary.BigEndian.Uint64(m.buf.Bytes()[int(w.WRID)*mcastSlot+uverbs.GRHSize:]))
			if err := m.post(m.u, w.WRID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestMulticastLoss: a sender on host A and three receivers of one IPv4
// group on host B, across the veth pair. On a clean link every receiver
// gets every datagram of a run; with 5 % loss on A's egress each reports
// exactly which it did not get (UD does not retransmit), the rest in
// order and once each. The three lose the same ones: one packet on the
// wire reaches every member on B's device.
func TestMulticastLoss(t *testing.T) {
	requireTwoHosts(t)
	const group = "239.1.2.9"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var members []*mcastMember
	for range 3 {
		m := new(mcastMember)
		u, err := rdmacm.JoinMulticast(ctx, hostB.addr.String(), group, &rdmacm.Config{SetupUD: m.setup})
		if err != nil {
			dumpNet(t)
			t.Fatalf("join %s from %s: %v", group, hostB, err)
		}
		m.u = u
		members = append(members, m)
		defer func() { m.mr.Close(); u.Close(); m.buf.Close() }()
	}
	sbuf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer sbuf.Close()
	snd, err := rdmacm.JoinMulticast(ctx, hostA.addr.String(), group, &rdmacm.Config{SendOnly: true})
	if err != nil {
		t.Fatalf("join %s from %s: %v", group, hostA, err)
	}
	defer snd.Close()
	smr, err := snd.PD().RegMR(sbuf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer smr.Close()
	p := snd.Peer()
	seq := uint64(0)
	// run sends n datagrams, each after the last one's completion and
	// after the members took what had come (their receives are reposted
	// as taken), and returns what each member got.
	run := func(n int) [][]uint64 {
		got := make([][]uint64, len(members))
		for i := range n {
			binary.BigEndian.PutUint64(sbuf.Bytes()[i%32*8:], seq)
			sge, err := smr.SGE(i%32*8, 8)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := snd.QP().PostSend([]uverbs.SendWR{{WRID: seq, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				SGL: []uverbs.SGE{sge}, AH: p.AH, RemoteQPN: p.QPN, RemoteQKey: p.QKey}}); err != nil {
				t.Fatal(err)
			}
			seq++
			for deadline := time.Now().Add(cmWait); ; time.Sleep(time.Millisecond) {
				var w [1]cq.WC
				k, err := snd.CQ().Poll(w[:])
				if err != nil || k == 1 && w[0].Status != cq.Success {
					t.Fatalf("send %d: %+v %v", seq-1, w[0], err)
				}
				if k == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("send %d did not complete", seq-1)
				}
			}
			if i%16 == 15 || i == n-1 {
				time.Sleep(20 * time.Millisecond) // let the last ones cross the pair
				for k, m := range members {
					got[k] = append(got[k], m.take(t)...)
				}
			}
		}
		return got
	}

	const clean, lossy = 50, 400
	first := seq
	for k, g := range run(clean) {
		want := make([]uint64, clean)
		for i := range want {
			want[i] = first + uint64(i)
		}
		if !slices.Equal(g, want) {
			t.Errorf("member %d on a clean link got %v", k, g)
		}
	}

	<-schedule(t, impair(0, hostA, netlink.Netem{Loss: 0.05}))
	first = seq
	got := run(lossy)
	<-schedule(t, repair(0, hostA))
	var lost [][]uint64
	for k, g := range got {
		var miss []uint64
		next := first
		for _, s := range g {
			if s < next || s >= first+lossy {
				t.Fatalf("member %d got %d after %d (a duplicate, out of order, or not of this run): %v", k, s, next, g)
			}
			for ; next < s; next++ {
				miss = append(miss, next-first)
			}
			next = s + 1
		}
		for ; next < first+lossy; next++ {
			miss = append(miss, next-first)
		}
		lost = append(lost, miss)
		t.Logf("member %d: %d of %d datagrams through 5 %% loss; lost %d: %v", k, len(g), lossy, len(miss), miss)
	}
	for k := 1; k < len(lost); k++ {
		if !slices.Equal(lost[k], lost[0]) {
			t.Errorf("members 0 and %d lost different datagrams: %v and %v", k, lost[0], lost[k])
		}
	}
	if n := len(lost[0]); n == 0 || n > lossy/4 {
		t.Errorf("%d of %d lost through 5 %% loss: netem did not act as set", n, lossy)
	}
}
