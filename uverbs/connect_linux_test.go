package uverbs_test

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// The harness's netdev d0 has 192.0.2.1: rxe lists it as ::ffff:192.0.2.1,
// RoCE v1 and v2, beside the link-local GIDs.
var vmAddr = netip.MustParseAddr("192.0.2.1")

func TestFindGID(t *testing.T) {
	e := newQPEnv(t)
	table, err := e.ctx.GIDTable(1)
	if err != nil {
		t.Fatal(err)
	}
	first := -1
	for _, g := range table {
		if g.Type == uverbs.GIDTypeRoCEv2 {
			first = g.Index
			break
		}
	}
	g, err := e.ctx.FindGID(1, uverbs.GIDTypeRoCEv2, netip.Addr{})
	if err != nil || g.Index != first {
		t.Errorf("FindGID(any RoCE v2) = %+v, %v; want index %d of %+v", g, err, first, table)
	}
	// An IPv4 address, or its IPv4-mapped IPv6 form. (rxe makes RoCE v2
	// GIDs only.)
	for _, a := range []netip.Addr{vmAddr, netip.AddrFrom16(vmAddr.As16())} {
		g, err := e.ctx.FindGID(1, uverbs.GIDTypeRoCEv2, a)
		if err != nil {
			t.Fatalf("FindGID(%v): %v (table %+v)", a, err, table)
		}
		if g.Type != uverbs.GIDTypeRoCEv2 || g.GID.Addr().Unmap() != vmAddr || g.Port != 1 {
			t.Errorf("FindGID(%v) = %+v", a, g)
		}
	}
	_, err = e.ctx.FindGID(1, uverbs.GIDTypeRoCEv2, netip.MustParseAddr("198.51.100.1"))
	if !errors.Is(err, unix.ENOENT) || !strings.HasPrefix(err.Error(), "find gid rxe0: port 1 has no RoCE v2 GID for 198.51.100.1") {
		t.Errorf("FindGID of an address d0 lacks: %v", err)
	} else {
		t.Log(err)
	}
	if _, err := e.ctx.FindGID(0, uverbs.GIDTypeRoCEv2, vmAddr); !errors.Is(err, unix.EINVAL) {
		t.Errorf("FindGID on port 0: %v, want EINVAL", err)
	}
}

// Misuse of ConnectRC and ConnectUD gives errors that say what is wrong
// and, from the kernel, which transition failed with which attributes.
func TestConnectErrors(t *testing.T) {
	e := newQPEnv(t)
	gid := rdmatest.GID(t, 1)
	rc, ud := e.qp(t, uverbs.RC), e.qp(t, uverbs.UD)
	peer := uverbs.Endpoint{QPN: 0x77, PSN: 1, GID: gid}
	me := uverbs.Endpoint{QPN: rc.QPN(), PSN: 2, GID: gid}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"ConnectRC on UD", ud.ConnectRC(me, peer, nil), "connect rc rxe0: a UD QP"},
		{"ConnectUD on RC", rc.ConnectUD(me, nil), "connect ud rxe0: a RC QP"},
		{"PSN of 25 bits", rc.ConnectRC(uverbs.Endpoint{PSN: 1 << 24, GID: gid}, peer, nil), "24 bits"},
		{"no remote GID on RoCE", rc.ConnectRC(me, uverbs.Endpoint{QPN: 0x77}, nil), "the remote endpoint has no GID"},
		{"no local GID", rc.ConnectRC(uverbs.Endpoint{}, peer, nil), "the local endpoint has no GID"},
		{"GID not ours", rc.ConnectRC(uverbs.Endpoint{GID: uverbs.GID{0x20, 0x01, 15: 9}}, peer, nil), "is not in port 1's GID table"},
		{"port 0", rc.ConnectRC(me, peer, &uverbs.ConnectOptions{Port: 9}), "connect rc rxe0: port 9"},
	} {
		if !errors.Is(c.err, unix.EINVAL) && !errors.Is(c.err, unix.ENOENT) || c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v; want EINVAL or ENOENT, saying %q", c.name, c.err, c.want)
		}
	}
	// A source GID index past the table fails at RTR, which names it.
	err := rc.ConnectRC(me, peer, &uverbs.ConnectOptions{GIDIndex: 250})
	if err == nil || !strings.Contains(err.Error(), "INIT→RTR") || !strings.Contains(err.Error(), "source GID index 250") {
		t.Errorf("ConnectRC with GID index 250: %v", err)
	} else {
		t.Log(err)
	}
	// The QP stayed in INIT, from which ConnectRC can go on (INIT→INIT
	// is a transition too); from RTS it cannot, and says so.
	if err := rc.ConnectRC(me, peer, nil); err != nil {
		t.Errorf("ConnectRC of a QP left in INIT: %v", err)
	}
	err = rc.ConnectRC(me, peer, nil)
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "RESET→INIT") || !strings.Contains(err.Error(), "new or in RESET") {
		t.Errorf("ConnectRC of a QP in RTS: %v", err)
	} else {
		t.Log(err)
	}
	if err := rc.Modify(&uverbs.QPAttr{State: uverbs.QPReset}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConnectRC(me, peer, nil); err != nil {
		t.Errorf("ConnectRC after RESET: %v", err)
	}
	if err := ud.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ud.ConnectUD(me, nil); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("ConnectUD of a closed QP: %v", err)
	}
}

// PostSendInline sends from a Go slice: RDMA write and send with
// immediate, with no allocation per post.
func TestPostSendInline(t *testing.T) {
	e := newQPEnv(t)
	a, b := e.qp(t, uverbs.RC), e.qp(t, uverbs.RC)
	rdmatest.ConnectRC(t, a, b)
	buf, err := uverbs.AllocBuffer(1 << 13)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := e.pd.RegMR(buf.Bytes(), rdmatest.AllAccess)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	mem := buf.Bytes()
	payload := make([]byte, 48) // on the heap, reused: no allocation per post
	copy(payload, "inline from a Go slice")

	write := uverbs.SendWR{WRID: 1, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		RemoteAddr: mr.Addr() + 4096, RKey: mr.RKey()}
	if err := a.PostSendInline(write, payload); err != nil {
		t.Fatal(err)
	}
	if w := rdmatest.PollN(t, e.cq, 1)[0]; w.Status != cq.Success || w.WRID != 1 {
		t.Fatalf("write completion %+v", w)
	}
	if !bytes.Equal(mem[4096:4096+48], payload) {
		t.Errorf("written %q, want %q", mem[4096:4096+48], payload)
	}

	if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 7, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	send := uverbs.SendWR{WRID: 2, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, Imm: 0x1234}
	if err := a.PostSendInline(send, payload[:5]); err != nil {
		t.Fatal(err)
	}
	for _, w := range rdmatest.PollN(t, e.cq, 2) {
		if w.Status != cq.Success || w.WRID == 7 && (w.ByteLen != 5 || w.Imm != 0x1234) {
			t.Errorf("completion %+v", w)
		}
	}
	if string(mem[:5]) != "inlin" {
		t.Errorf("received %q", mem[:5])
	}

	// Zero allocations: post, then poll the completion, 200 times.
	wcs := make([]cq.WC, 4)
	allocs := testing.AllocsPerRun(200, func() {
		if err := a.PostSendInline(write, payload); err != nil {
			t.Fatal(err)
		}
		for n := 0; n == 0; {
			if n, err = e.cq.Poll(wcs); err != nil || n > 0 && wcs[0].Status != cq.Success {
				t.Fatalf("poll: %d %v %+v", n, err, wcs[0])
			}
		}
	})
	if allocs != 0 {
		t.Errorf("PostSendInline and Poll: %v allocations a run, want 0", allocs)
	}

	if err := a.PostSendInline(uverbs.SendWR{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, 1)}}, payload); !errors.Is(err, unix.EINVAL) {
		t.Errorf("PostSendInline with an SGL: %v, want EINVAL", err)
	}
	big := make([]byte, a.Cap().MaxInlineData+1)
	if err := a.PostSendInline(uverbs.SendWR{Opcode: uverbs.WRSend}, big); err == nil {
		t.Errorf("PostSendInline of %d bytes (max inline %d) succeeded", len(big), a.Cap().MaxInlineData)
	} else {
		t.Log(err)
	}
}

// A UD datagram sent inline arrives after its GRH, which names the
// sender: an IPv4 header for RoCE v2 over IPv4, a GRH for the
// link-local IPv6 GID.
func TestUDInlineGRH(t *testing.T) {
	e := newQPEnv(t)
	buf, err := uverbs.AllocBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := e.pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	v4, err := e.ctx.FindGID(1, uverbs.GIDTypeRoCEv2, vmAddr)
	if err != nil {
		t.Fatal(err)
	}
	ll, err := e.ctx.FindGID(1, uverbs.GIDTypeRoCEv2, netip.Addr{}) // the first: the link-local IPv6 one
	if err != nil {
		t.Fatal(err)
	}
	if ll.GID.Addr().Is4In6() {
		t.Fatalf("the first RoCE v2 GID is %v, not an IPv6 address", ll.GID)
	}
	for _, c := range []struct {
		name    string
		gid     uverbs.GID
		version int
	}{{"ipv4", v4.GID, 4}, {"ipv6", ll.GID, 6}} {
		t.Run(c.name, func(t *testing.T) {
			a, b := e.qp(t, uverbs.UD), e.qp(t, uverbs.UD)
			ea := uverbs.Endpoint{QPN: a.QPN(), PSN: 1, GID: c.gid}
			eb := uverbs.Endpoint{QPN: b.QPN(), PSN: 2, GID: c.gid}
			for _, p := range []struct {
				qp *uverbs.QP
				ep uverbs.Endpoint
			}{{a, ea}, {b, eb}} {
				if err := p.qp.ConnectUD(p.ep, nil); err != nil {
					t.Fatal(err)
				}
			}
			ah, err := e.pd.NewAHTo(ea, eb, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ah.Close()
			mem := buf.Bytes()
			clear(mem)
			if _, err := b.PostRecv([]uverbs.RecvWR{{WRID: 9, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 0, uverbs.UDRecvSize(64))}}}); err != nil {
				t.Fatal(err)
			}
			msg := []byte("hello over UD")
			if err := a.PostSendInline(uverbs.SendWR{WRID: 3, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				AH: ah, RemoteQPN: eb.QPN, RemoteQKey: uverbs.DefaultQKey}, msg); err != nil {
				t.Fatal(err)
			}
			var recv cq.WC
			for _, w := range rdmatest.PollN(t, e.cq, 2) {
				if w.Status != cq.Success {
					t.Fatalf("completion %+v", w)
				}
				if w.WRID == 9 {
					recv = w
				}
			}
			if recv.Flags&cq.WithGRH == 0 || recv.ByteLen != uint32(uverbs.UDRecvSize(len(msg))) || recv.SrcQP != a.QPN() {
				t.Errorf("receive %+v", recv)
			}
			if got := mem[uverbs.GRHSize : uverbs.GRHSize+len(msg)]; !bytes.Equal(got, msg) {
				t.Errorf("payload %q", got)
			}
			grh, err := uverbs.ParseGRH(mem)
			if err != nil {
				t.Fatal(err)
			}
			if grh.IPVersion != c.version || grh.SGID != c.gid || grh.DGID != c.gid || grh.Src() != c.gid.Addr().Unmap() {
				t.Errorf("GRH %+v, want IPv%d from and to %v", grh, c.version, c.gid)
			}

			// The answer goes back through an AH made from the
			// completion and the GRH (ibv_create_ah_from_wc).
			reply, err := e.pd.NewAHFromWC(recv, mem, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer reply.Close()
			if _, err := a.PostRecv([]uverbs.RecvWR{{WRID: 10, SGL: []uverbs.SGE{rdmatest.SGE(t, mr, 2048, uverbs.UDRecvSize(64))}}}); err != nil {
				t.Fatal(err)
			}
			if err := b.PostSendInline(uverbs.SendWR{WRID: 4, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
				AH: reply, RemoteQPN: recv.SrcQP, RemoteQKey: uverbs.DefaultQKey}, []byte("reply")); err != nil {
				t.Fatal(err)
			}
			for _, w := range rdmatest.PollN(t, e.cq, 2) {
				if w.Status != cq.Success || w.WRID == 10 && w.SrcQP != b.QPN() {
					t.Fatalf("reply's completion %+v", w)
				}
			}
			if got := mem[2048+uverbs.GRHSize : 2048+uverbs.GRHSize+5]; string(got) != "reply" {
				t.Errorf("reply's payload %q", got)
			}

			// Misuse: no receive, a failed one, no room for a GRH, a GRH
			// to a GID the port does not have.
			bad := []struct {
				name string
				wc   cq.WC
				grh  []byte
			}{
				{"send completion", cq.WC{Status: cq.Success, Opcode: cq.OpSend, Flags: cq.WithGRH}, mem},
				{"flushed receive", cq.WC{Status: cq.WRFlushErr, Opcode: cq.OpRecv, Flags: cq.WithGRH}, mem},
				{"short GRH", recv, mem[:uverbs.GRHSize-1]},
				{"unknown GID", recv, append([]byte{0x60}, make([]byte, uverbs.GRHSize-1)...)}, // a GRH from and to ::
			}
			for _, m := range bad {
				if ah, err := e.pd.NewAHFromWC(m.wc, m.grh, 1); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "create ah from wc") {
					if ah != nil {
						ah.Close()
					}
					t.Errorf("NewAHFromWC with %s: %v, want EINVAL naming the verb", m.name, err)
				}
			}
		})
	}
}
