package mlx5model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

const allAccess = uapi.IB_UVERBS_ACCESS_LOCAL_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_WRITE |
	uapi.IB_UVERBS_ACCESS_REMOTE_READ | uapi.IB_UVERBS_ACCESS_REMOTE_ATOMIC

// The control path answers as Linux 6.1 with mlx5_ib does.
func TestControlPath(t *testing.T) {
	e := newEnv(t, Options{})
	if !e.conn.UsesInvokeWrite() {
		t.Error("INVOKE_WRITE probe: the model should answer ENOSPC")
	}
	if ok, err := e.conn.Supports(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_CREATE); !ok || err != nil {
		t.Errorf("QP_CREATE probe: %v %v", ok, err)
	}
	if ok, err := e.conn.Supports(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE); !ok || err != nil {
		t.Errorf("SRQ_CREATE probe: %v %v", ok, err)
	}
	if ok, _ := e.conn.Supports(uapi.UVERBS_OBJECT_WQ, uapi.UVERBS_METHOD_WQ_CREATE); ok {
		t.Error("WQ_CREATE is not modelled, yet the probe says it is there")
	}
	r := e.resp
	if r.TotBfregs != 0 || r.CQEVersion != 1 || r.BFRegSize != bfRegSize || r.NumPorts != 1 || r.ResponseLength == 0 {
		t.Errorf("GET_CONTEXT response %+v", r)
	}
	if e.kc.NumCompVectors != 2 {
		t.Errorf("%d completion vectors", e.kc.NumCompVectors)
	}
	if _, err := kverbs.GetContext(e.conn, nil, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a second GET_CONTEXT: %v, want EINVAL", err)
	}
	dev, err := kverbs.QueryDevice(e.conn)
	if err != nil || dev.Base.MaxCQE != maxCQE || dev.Base.VendorID != vendorID || dev.Base.PhysPortCnt != 1 {
		t.Errorf("query device: %+v, %v", dev.Base, err)
	}
	port, err := kverbs.QueryPort(e.conn, 1)
	if err != nil || port.LegacyResp.LinkLayer != 2 || port.LegacyResp.State != 4 || port.LegacyResp.GIDTblLen != gidTableLen {
		t.Errorf("query port: %+v, %v", port, err)
	}
	if _, err := kverbs.QueryPort(e.conn, 2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("query port 2: %v, want EINVAL", err)
	}
	g, err := kverbs.QueryGIDEntry(e.conn, 1, 1)
	if err != nil || g.GIDType != uapi.IB_UVERBS_GID_TYPE_ROCE_V2 || !bytes.Equal(structBytes(&g)[:16], gids[1][:]) {
		t.Errorf("GID 1: %+v, %v", g, err)
	}
	if _, err := kverbs.QueryGIDEntry(e.conn, 1, 2); !errors.Is(err, unix.ENODATA) {
		t.Errorf("GID 2: %v, want ENODATA", err)
	}
	if _, err := kverbs.QueryGIDEntry(e.conn, 1, gidTableLen); !errors.Is(err, unix.EINVAL) {
		t.Errorf("GID %d: %v, want EINVAL", gidTableLen, err)
	}
	tab := make([]kverbs.GIDEntry, 8)
	if n, err := kverbs.QueryGIDTable(e.conn, tab); n != 2 || err != nil {
		t.Errorf("GID table: %d, %v", n, err)
	}
	// The ioctl framework's own rules.
	var cmd transport.Cmd
	cmd.Reset(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_QUERY_PORT)
	cmd.Const(uapi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1)
	cmd.Out(uapi.UVERBS_ATTR_QUERY_PORT_RESP, 48, true)
	cmd.InU32(0x77, 0) // unknown and mandatory
	if err := e.conn.Invoke(&cmd); !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Errorf("unknown mandatory attribute: %v, want EPROTONOSUPPORT", err)
	}
	wrong := transport.NewKernelConn(e.c.FD(), uapi.RDMA_DRIVER_RXE, e.c)
	if _, err := kverbs.QueryPort(wrong, 1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("wrong driver id: %v, want EINVAL", err)
	}
	// PD in use.
	m := e.reg(4096, allAccess)
	if err := kverbs.DeallocPD(e.conn, e.pd); !errors.Is(err, unix.EBUSY) {
		t.Errorf("dealloc a PD with an MR: %v, want EBUSY", err)
	}
	_ = m
	if _, err := kverbs.RegMR(e.conn, e.pd, unsafe.Pointer(&m.mem[0]), 4096, m.addr, uapi.IB_UVERBS_ACCESS_REMOTE_WRITE); !errors.Is(err, unix.EINVAL) {
		t.Errorf("remote write without local write: %v, want EINVAL", err)
	}
}

// CQ creation checks the driver data as mlx5_ib does.
func TestCreateCQChecks(t *testing.T) {
	e := newEnv(t, Options{})
	for _, c := range []struct {
		name string
		edit func(*uapi.Mlx5IBCreateCQ)
		want unix.Errno
	}{
		{"cqe size 100", func(r *uapi.Mlx5IBCreateCQ) { r.CQESize = 100 }, unix.EINVAL},
		{"no UAR page on a dynamic-UAR context", func(r *uapi.Mlx5IBCreateCQ) { r.Flags = 0 }, unix.EINVAL},
		{"an unknown UAR page", func(r *uapi.Mlx5IBCreateCQ) { r.UARPageIndex = 999 }, unix.EINVAL},
		{"reserved", func(r *uapi.Mlx5IBCreateCQ) { r.Reserved1 = 1 }, unix.EINVAL},
		{"128-byte padding of 64-byte CQEs", func(r *uapi.Mlx5IBCreateCQ) { r.Flags |= uapi.MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD }, unix.EINVAL},
		{"unaligned buffer", func(r *uapi.Mlx5IBCreateCQ) { r.BufAddr = uapi.NewPointer(unsafe.Add(ptrOf(&r.BufAddr), 64)) }, unix.EINVAL},
	} {
		if _, err := e.tryCQ(7, -1, 64, c.edit); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	e.wantViolations = append(e.wantViolations, "compressed CQEs")
	if _, err := e.tryCQ(7, -1, 64, func(r *uapi.Mlx5IBCreateCQ) { r.CQECompEn = 1 }); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("compression: %v", err)
	}
	if v := e.d.Violations(); len(v) != 1 {
		t.Errorf("compression asked, violations %q", v)
	}
	if _, err := e.tryCQ(1<<22, -1, 64, func(*uapi.Mlx5IBCreateCQ) {}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("2^22 entries: %v, want EINVAL", err)
	}
	q := e.newCQ(1, -1)
	if q.n != 2 {
		t.Errorf("cqe 1: %d entries", q.n)
	}
	// A CQ a QP uses cannot go.
	qp := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 8, 8, 16)
	if _, err := kverbs.DestroyCQ(e.conn, q.handle); !errors.Is(err, unix.EBUSY) {
		t.Errorf("destroy a CQ in use: %v, want EBUSY", err)
	}
	if _, err := kverbs.DestroyQP(e.conn, qp.handle); err != nil {
		t.Fatal(err)
	}
	if _, err := kverbs.DestroyCQ(e.conn, q.handle); err != nil {
		t.Errorf("destroy: %v", err)
	}
}

// A CQ whose entries look valid before the device wrote any is the
// provider's bug.
func TestCQBufferNotInitialised(t *testing.T) {
	e := newEnv(t, Options{})
	e.wantViolations = []string{"looks valid before the device wrote it"}
	q, err := e.tryCQ(3, -1, 64, func(r *uapi.Mlx5IBCreateCQ) {
		clear(bytesAt(ptrOf(&r.BufAddr), 4*64))
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = q
	if len(e.d.Violations()) != 1 {
		t.Errorf("violations: %q", e.d.Violations())
	}
}

// Sends, receives and the owner bit over many passes of a small CQ, with
// every field of the CQEs the HCA writes.
func TestSendRecvAcrossPasses(t *testing.T) {
	for _, size := range []uint32{64, 128} {
		e := newEnv(t, Options{})
		scq, _ := e.tryCQ(3, -1, size, func(*uapi.Mlx5IBCreateCQ) {})
		rcq, _ := e.tryCQ(3, -1, size, func(*uapi.Mlx5IBCreateCQ) {})
		a := e.newQP(uapi.IB_UVERBS_QPT_RC, scq, scq, 8, 8, 32)
		b := e.newQP(uapi.IB_UVERBS_QPT_RC, rcq, rcq, 8, 8, 32)
		a.rts(b, 0)
		b.rts(a, 0)
		m := e.reg(1<<16, allAccess)
		for i := 0; i < 20; i++ {
			msg := []byte{byte(i), 1, 2, 3, 4, 5, 6, 7, 8}
			copy(m.mem, msg)
			b.recv(seg(m.addr+4096, 4, m.key), seg(m.addr+8192, 100, m.key))
			a.send((&wqe{op: uapi.MLX5_OPCODE_SEND_IMM, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE, imm: 0xa0b0c0d0 + uint32(i)}).data(m.addr, 9, m.key))
			r := rcq.wait()
			s := scq.wait()
			if opcode(r) != uapi.MLX5_CQE_RESP_SEND_IMM || byteCnt(r) != 9 || immOf(r) != 0xa0b0c0d0+uint32(i) ||
				counter(r) != uint16(i) || uidxOf(r) != b.uidx || sopQPN(r)&0xffffff != b.qpn || rqpnOf(r)&0xffffff != a.qpn {
				t.Fatalf("%d-byte CQEs, round %d: responder CQE %x", size, i, r)
			}
			if opcode(s) != uapi.MLX5_CQE_REQ || sopQPN(s) != uint32(uapi.MLX5_OPCODE_SEND_IMM)<<24|a.qpn ||
				counter(s) != uint16(i) || uidxOf(s) != a.uidx {
				t.Fatalf("round %d: requester CQE %x", i, s)
			}
			if got := append(append([]byte{}, m.mem[4096:4100]...), m.mem[8192:8197]...); !bytes.Equal(got, msg) {
				t.Fatalf("round %d: received %x", i, got)
			}
		}
		if st := e.d.Stats(); st.CQEs != 40 || st.SendDoorbells != 20 {
			t.Errorf("stats %+v", st)
		}
	}
}

// A WQE that runs past the end of the send queue goes on at its start;
// RDMA write, read, and inline data.
func TestWQEWrapAndRDMA(t *testing.T) {
	e := newEnv(t, Options{})
	scq, rcq := e.newCQ(15, -1), e.newCQ(15, -1)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, scq, scq, 4, 4, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, rcq, rcq, 4, 4, 16)
	a.rts(b, 0)
	b.rts(a, 0)
	m := e.reg(1<<16, allAccess)
	// Three 1-block WQEs, then one of 3 blocks from block 3: blocks 3, 0, 1.
	for i := 0; i < 3; i++ {
		a.send((&wqe{op: uapi.MLX5_OPCODE_NOP, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}))
		if c := scq.wait(); opcode(c) != uapi.MLX5_CQE_REQ || counter(c) != uint16(i) {
			t.Fatalf("NOP %d: %x", i, c)
		}
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 8)[:120]
	a.send((&wqe{op: uapi.MLX5_OPCODE_RDMA_WRITE, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).raddr(m.addr+1000, m.key).inline(payload))
	if c := scq.wait(); opcode(c) != uapi.MLX5_CQE_REQ || counter(c) != 3 {
		t.Fatalf("wrapped write: %x", c)
	}
	if !bytes.Equal(m.mem[1000:1120], payload) {
		t.Errorf("wrapped inline write wrote %q", m.mem[1000:1120])
	}
	if a.post != 6 {
		t.Fatalf("posted %d blocks", a.post)
	}
	a.send((&wqe{op: uapi.MLX5_OPCODE_RDMA_READ, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).raddr(m.addr+1000, m.key).data(m.addr+5000, 120, m.key))
	if c := scq.wait(); opcode(c) != uapi.MLX5_CQE_REQ || byteCnt(c) != 120 || sopQPN(c)>>24 != uapi.MLX5_OPCODE_RDMA_READ {
		t.Fatalf("read: %x", c)
	}
	if !bytes.Equal(m.mem[5000:5120], payload) {
		t.Errorf("read %q", m.mem[5000:5120])
	}
	// Unsignaled: no CQE; write with immediate consumes a receive.
	a.send((&wqe{op: uapi.MLX5_OPCODE_RDMA_WRITE}).raddr(m.addr+9000, m.key).data(m.addr, 8, m.key))
	scq.empty("unsignaled write")
	b.recv(seg(m.addr+20000, 16, m.key))
	a.send((&wqe{op: uapi.MLX5_OPCODE_RDMA_WRITE_IMM, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE | uapi.MLX5_WQE_CTRL_SOLICITED, imm: 77}).
		raddr(m.addr+9000, m.key).data(m.addr, 8, m.key))
	if c := rcq.wait(); opcode(c) != uapi.MLX5_CQE_RESP_WR_IMM || byteCnt(c) != 8 || immOf(c) != 77 || !solicitd(c) {
		t.Errorf("write with immediate: %x", c)
	}
	scq.wait()
}

// Atomics see the target big-endian, and return the old value so.
func TestAtomics(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.newCQ(15, -1)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	a.rts(b, 0)
	b.rts(a, 0)
	m := e.reg(8192, allAccess)
	binary.BigEndian.PutUint64(m.mem[64:], 7)
	atom := func(op uint8, swapAdd, cmp uint64) []byte {
		var s [16]byte
		binary.BigEndian.PutUint64(s[0:], swapAdd)
		binary.BigEndian.PutUint64(s[8:], cmp)
		w := (&wqe{op: op, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).raddr(m.addr+64, m.key)
		w.segs = append(w.segs, s)
		a.send(w.data(m.addr+128, 8, m.key))
		return q.wait()
	}
	if c := atom(uapi.MLX5_OPCODE_ATOMIC_CS, 99, 7); opcode(c) != uapi.MLX5_CQE_REQ || byteCnt(c) != 8 {
		t.Fatalf("compare-and-swap: %x", c)
	}
	if old, now := binary.BigEndian.Uint64(m.mem[128:]), binary.BigEndian.Uint64(m.mem[64:]); old != 7 || now != 99 {
		t.Errorf("compare-and-swap: old %d now %d", old, now)
	}
	atom(uapi.MLX5_OPCODE_ATOMIC_FA, 5, 0)
	if old, now := binary.BigEndian.Uint64(m.mem[128:]), binary.BigEndian.Uint64(m.mem[64:]); old != 99 || now != 104 {
		t.Errorf("fetch-and-add: old %d now %d", old, now)
	}
}

// Arms: next, solicited, stale sequence numbers, one event per arm, and
// arms of CQs sharing a UAR page whose doorbells overwrite each other.
func TestArmsAndEvents(t *testing.T) {
	e := newEnv(t, Options{})
	ch := e.channel()
	scq, rcq := e.newCQ(15, ch), e.newCQ(15, ch)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, scq, scq, 16, 16, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, rcq, rcq, 16, 16, 16)
	a.rts(b, 0)
	b.rts(a, 0)
	m := e.reg(8192, allAccess)
	send := func(fm uint8) {
		b.recv(seg(m.addr+4096, 64, m.key))
		a.send((&wqe{op: uapi.MLX5_OPCODE_SEND, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE | fm}).data(m.addr, 8, m.key))
		rcq.wait()
		scq.wait()
	}
	// A CQE before the arm raises nothing.
	send(0)
	rcq.arm(false, e.nc)
	noEvent(t, ch, "a CQE before the arm")
	// Next: any CQE.
	send(0)
	if h, ok := readEvent(t, ch); !ok || h != rcq.user {
		t.Fatalf("next arm: event %#x %v", h, ok)
	}
	rcq.sn++ // the event was read
	// One arm, one event.
	send(0)
	noEvent(t, ch, "a second CQE after one arm")
	// Stale: an arm with the old sequence number is ignored.
	rcq.sn--
	rcq.arm(false, e.nc)
	send(0)
	noEvent(t, ch, "a stale arm")
	rcq.sn++
	// Solicited: an unsolicited receive raises nothing, a solicited one does.
	rcq.arm(true, e.nc)
	send(0)
	noEvent(t, ch, "an unsolicited receive under a solicited arm")
	send(uapi.MLX5_WQE_CTRL_SOLICITED)
	if h, ok := readEvent(t, ch); !ok || h != rcq.user {
		t.Fatalf("solicited arm: event %#x %v", h, ok)
	}
	rcq.sn++
	// Two CQs on one UAR page, armed back to back before the HCA looks:
	// the second doorbell overwrites the first, both arms hold.
	e.d.mu.Lock()
	scq.arm(false, e.nc)
	rcq.arm(false, e.nc)
	e.d.mu.Unlock()
	send(0)
	got := map[uint64]bool{}
	for i := 0; i < 2; i++ {
		h, ok := readEvent(t, ch)
		if !ok {
			t.Fatalf("coalesced arms: %d events of 2 (stats %+v)", i, e.d.Stats())
		}
		got[h] = true
	}
	if !got[scq.user] || !got[rcq.user] {
		t.Errorf("coalesced arms: events for %v", got)
	}
	if st := e.d.Stats(); st.StaleArms != 1 || st.Events != 4 {
		t.Errorf("stats %+v", st)
	}
}

// A QP moved to the error state flushes every WQE, one CQE each, signaled
// or not, posted before or after.
func TestFlush(t *testing.T) {
	e := newEnv(t, Options{})
	scq, rcq := e.newCQ(31, -1), e.newCQ(31, -1)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, scq, rcq, 16, 16, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, scq, rcq, 16, 16, 16)
	a.rts(b, 0)
	b.rts(a, 0)
	m := e.reg(8192, allAccess)
	a.recv(seg(m.addr, 8, m.key))
	a.recv(seg(m.addr, 8, m.key))
	// Two sends on a QP in INIT wait for RTS; then the error state flushes
	// them and the receives.
	if err := a.modify(uapi.IBUverbsModifyQP{AttrMask: maskState, QPState: qpsErr}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		c := rcq.wait()
		if opcode(c) != uapi.MLX5_CQE_RESP_ERR || syndrome(c) != uapi.MLX5_CQE_SYNDROME_WR_FLUSH_ERR || counter(c) != uint16(i) ||
			errOpQPN(c)&0xffffff != a.qpn || uidxOf(c) != a.uidx {
			t.Errorf("receive flush %d: %x", i, c)
		}
	}
	a.send(&wqe{op: uapi.MLX5_OPCODE_RDMA_WRITE}) // unsignaled
	a.recv(seg(m.addr, 8, m.key))
	if c := scq.wait(); opcode(c) != uapi.MLX5_CQE_REQ_ERR || syndrome(c) != uapi.MLX5_CQE_SYNDROME_WR_FLUSH_ERR ||
		errOpQPN(c) != uint32(uapi.MLX5_OPCODE_RDMA_WRITE)<<24|a.qpn {
		t.Errorf("send flush: %x", c)
	}
	if c := rcq.wait(); syndrome(c) != uapi.MLX5_CQE_SYNDROME_WR_FLUSH_ERR || counter(c) != 2 {
		t.Errorf("a receive posted in error: %x", c)
	}
	rcq.empty("flushed once")
	if s, _ := e.d.QPState(a.qpn); s != qpsErr {
		t.Errorf("state %d", s)
	}
}

// Errors: an injected syndrome, a bad rkey (the responder goes to error
// too), a receive too small, a bad lkey; what follows is flushed.
func TestErrors(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.newCQ(63, -1)
	pair := func() (*tqp, *tqp) {
		a := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 16, 16)
		b := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 16, 16)
		a.rts(b, 0)
		b.rts(a, 0)
		return a, b
	}
	m := e.reg(8192, allAccess)
	ro := e.reg(4096, uapi.IB_UVERBS_ACCESS_REMOTE_READ)

	a, _ := pair()
	e.d.InjectError(a.qpn, uapi.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR)
	bell := a.write(&wqe{op: uapi.MLX5_OPCODE_NOP}) // unsignaled, yet its error completes
	a.write(&wqe{op: uapi.MLX5_OPCODE_NOP, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE})
	_ = bell
	a.ringSend(a.write(&wqe{op: uapi.MLX5_OPCODE_NOP}))
	if c := q.wait(); opcode(c) != uapi.MLX5_CQE_REQ_ERR || syndrome(c) != uapi.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR || counter(c) != 0 {
		t.Errorf("injected: %x", c)
	}
	for i := 1; i < 3; i++ {
		if c := q.wait(); syndrome(c) != uapi.MLX5_CQE_SYNDROME_WR_FLUSH_ERR || counter(c) != uint16(i) {
			t.Errorf("after the injected error, WQE %d: %x", i, c)
		}
	}

	a, b := pair()
	b.recv(seg(m.addr, 8, m.key))
	a.send((&wqe{op: uapi.MLX5_OPCODE_RDMA_WRITE, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).raddr(ro.addr, ro.key).data(m.addr, 8, m.key))
	// Either order: the requester's error, the responder's flush.
	c1, c2 := q.wait(), q.wait()
	if opcode(c1) == uapi.MLX5_CQE_RESP_ERR {
		c1, c2 = c2, c1
	}
	if opcode(c1) != uapi.MLX5_CQE_REQ_ERR || syndrome(c1) != uapi.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR {
		t.Errorf("write to a read-only region: %x", c1)
	}
	if opcode(c2) != uapi.MLX5_CQE_RESP_ERR || syndrome(c2) != uapi.MLX5_CQE_SYNDROME_WR_FLUSH_ERR {
		t.Errorf("the responder's receive after the NAK: %x", c2)
	}
	if s, _ := e.d.QPState(b.qpn); s != qpsErr {
		t.Errorf("responder state %d after a remote access error", s)
	}

	a, b = pair()
	b.recv(seg(m.addr+4096, 4, m.key))
	a.send((&wqe{op: uapi.MLX5_OPCODE_SEND, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).data(m.addr, 16, m.key))
	c1, c2 = q.wait(), q.wait()
	if opcode(c1) == uapi.MLX5_CQE_REQ_ERR {
		c1, c2 = c2, c1
	}
	if opcode(c1) != uapi.MLX5_CQE_RESP_ERR || syndrome(c1) != uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR ||
		opcode(c2) != uapi.MLX5_CQE_REQ_ERR || syndrome(c2) != uapi.MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR {
		t.Errorf("16 bytes into 4: %x / %x", c1, c2)
	}

	a, _ = pair()
	a.send((&wqe{op: uapi.MLX5_OPCODE_RDMA_WRITE, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).raddr(m.addr, m.key).data(m.addr, 8, m.key^0x100))
	if c := q.wait(); syndrome(c) != uapi.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR {
		t.Errorf("a bad lkey: %x", c)
	}
	a, _ = pair()
	a.send((&wqe{op: uapi.MLX5_OPCODE_RDMA_WRITE, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).raddr(m.addr, m.key).data(m.addr+8190, 8, m.key))
	if c := q.wait(); syndrome(c) != uapi.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR {
		t.Errorf("past the region's end: %x", c)
	}
}

// An RC send without a receive waits (RNR) until one is posted.
func TestRNRWait(t *testing.T) {
	e := newEnv(t, Options{})
	scq, rcq := e.newCQ(15, -1), e.newCQ(15, -1)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, scq, scq, 16, 16, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, rcq, rcq, 16, 16, 16)
	a.rts(b, 0)
	b.rts(a, 0)
	m := e.reg(8192, allAccess)
	a.send((&wqe{op: uapi.MLX5_OPCODE_SEND, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).data(m.addr, 8, m.key))
	a.send((&wqe{op: uapi.MLX5_OPCODE_RDMA_WRITE, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).raddr(m.addr+100, m.key).data(m.addr, 8, m.key))
	scq.empty("a send with no receive, and the write behind it")
	b.recv(seg(m.addr+4096, 64, m.key))
	if c := rcq.wait(); opcode(c) != uapi.MLX5_CQE_RESP_SEND {
		t.Errorf("receive: %x", c)
	}
	if c1, c2 := scq.wait(), scq.wait(); counter(c1) != 0 || counter(c2) != 1 {
		t.Errorf("in order after the wait: %x %x", c1, c2)
	}
	if e.d.Stats().RNRWaits != 1 {
		t.Errorf("stats %+v", e.d.Stats())
	}
}

// Overrun: no CQE overwrites one not yet consumed; the CQ breaks and the
// async fd gets CQ_ERR naming it.
func TestOverrun(t *testing.T) {
	e := newEnv(t, Options{})
	q, other := e.newCQ(1, -1), e.newCQ(15, -1)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, q, other, 8, 8, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, other, other, 8, 8, 16)
	a.rts(b, 0)
	b.rts(a, 0)
	for i := 0; i < 3; i++ {
		a.send(&wqe{op: uapi.MLX5_OPCODE_NOP, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE})
	}
	var ev uapi.IBUverbsAsyncEventDesc
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := unix.Read(e.kc.AsyncFD, structBytes(&ev))
		if err == nil && n == 16 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CQ_ERR: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if ev.EventType != 0 || ev.Element != q.user {
		t.Errorf("async event %+v, want CQ_ERR for %#x", ev, q.user)
	}
	for i := 0; i < 2; i++ {
		if c := q.poll(); c == nil || counter(c) != uint16(i) {
			t.Errorf("CQE %d before the overrun: %x", i, c)
		}
	}
	if c := q.poll(); c != nil {
		t.Errorf("a third CQE in a CQ of 2: %x", c)
	}
	r, err := kverbs.DestroyQP(e.conn, a.handle)
	if err != nil || r != 0 {
		t.Errorf("destroy qp: %d %v", r, err)
	}
	evs, err := kverbs.DestroyCQ(e.conn, q.handle)
	if err != nil || evs.Async != 1 {
		t.Errorf("destroy cq: %+v %v, want 1 async event reported", evs, err)
	}
}

// Resize: the device ends the old ring with a RESIZE_CQ CQE and goes on in
// the new one at the same producer count; a size below what the ring
// holds is refused.
func TestResize(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.newCQ(3, -1)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	a.rts(b, 0)
	b.rts(a, 0)
	for i := 0; i < 2; i++ {
		a.send(&wqe{op: uapi.MLX5_OPCODE_NOP, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE})
	}
	time.Sleep(50 * time.Millisecond) // both land
	resize := func(n uint32) ([]byte, error) {
		buf := e.dma(int(n) * 64)
		for i := uint32(0); i < n; i++ {
			buf[i*64+63] = uapi.MLX5_CQE_INVALID << 4
		}
		req := uapi.Mlx5IBResizeCQ{BufAddr: uapi.NewPointer(unsafe.Pointer(&buf[0])), CQESize: 64}
		_, err := kverbs.ResizeCQ(e.conn, q.handle, n-1, structBytes(&req), nil)
		return buf, err
	}
	if _, err := resize(2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("resize to 1 entry holding 2: %v, want EINVAL", err)
	}
	buf, err := resize(16)
	if err != nil {
		t.Fatal(err)
	}
	// Copy as the provider does: each CQE to the index after its own.
	var copies [][]byte
	for {
		c := q.poll()
		if c == nil {
			t.Fatal("no resize CQE")
		}
		if opcode(c) == uapi.MLX5_CQE_RESIZE_CQ {
			break
		}
		copies = append(copies, c)
	}
	if len(copies) != 2 {
		t.Fatalf("%d CQEs before the resize CQE", len(copies))
	}
	q.buf, q.n = buf, 16
	for i, c := range copies {
		k := q.ci - 2 + uint32(i) // q.ci is past the resize CQE
		copy(buf[(k&15)*64:], c)
		buf[(k&15)*64+63] = c[63]&^1 | uint8(k/16&1)
	}
	q.ci -= 2
	a.send(&wqe{op: uapi.MLX5_OPCODE_NOP, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE})
	for i := 0; i < 3; i++ {
		if c := q.wait(); counter(c) != uint16(i) {
			t.Errorf("CQE %d after the resize: %x", i, c)
		}
	}
	if q.ci != 4 { // 2 copied, the resize CQE's index, 1 new
		t.Errorf("consumer index %d", q.ci)
	}
}

// UD: routed by the address vector's QPN, a Q_Key check, a GRH in front
// of the payload.
func TestUD(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.newCQ(15, -1)
	a := e.newQP(uapi.IB_UVERBS_QPT_UD, q, q, 16, 16, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_UD, q, q, 16, 16, 16)
	a.rts(nil, 0x11)
	b.rts(nil, 0x22)
	m := e.reg(8192, allAccess)
	var resp uapi.Mlx5IBCreateAHResp
	attr := uapi.IBUverbsAHAttr{Grh: uapi.IBUverbsGlobalRoute{Dgid: gids[1], SgidIndex: 1, HopLimit: 64}, IsGlobal: 1, PortNum: 1}
	if _, err := kverbs.CreateAH(e.conn, e.pd, 0, &attr, structBytes(&resp)); err != nil || resp.Dmac != portMAC {
		t.Fatalf("create ah: %v, dmac %x", err, resp.Dmac)
	}
	av := func(qpn, qkey uint32) []byte {
		b := make([]byte, avSize)
		binary.BigEndian.PutUint32(b[avQKey:], qkey)
		binary.BigEndian.PutUint32(b[avDQPDCT:], qpn|uapi.MLX5_EXTENDED_UD_AV)
		copy(b[avRMAC:], resp.Dmac[:])
		binary.BigEndian.PutUint32(b[avGrhGIDFl:], 1<<30|1<<20)
		b[avHopLimit] = 64
		copy(b[avRGID:], gids[1][:])
		return b
	}
	copy(m.mem, "hello")
	b.recv(seg(m.addr+4096, 100, m.key))
	a.send((&wqe{op: uapi.MLX5_OPCODE_SEND, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).raw(av(b.qpn, 0x33)).data(m.addr, 5, m.key))
	q.wait()
	q.empty("a wrong Q_Key drops the datagram")
	a.send((&wqe{op: uapi.MLX5_OPCODE_SEND, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).raw(av(b.qpn, 0x22)).data(m.addr, 5, m.key))
	c1, c2 := q.wait(), q.wait()
	if opcode(c1) != uapi.MLX5_CQE_RESP_SEND {
		c1, c2 = c2, c1
	}
	if opcode(c1) != uapi.MLX5_CQE_RESP_SEND || byteCnt(c1) != 45 || rqpnOf(c1) != uapi.MLX5_CQE_L3_HDR_TYPE_IPV4<<28|a.qpn ||
		opcode(c2) != uapi.MLX5_CQE_REQ {
		t.Errorf("UD completions %x / %x", c1, c2)
	}
	if got := m.mem[4096+40 : 4096+45]; string(got) != "hello" || m.mem[4096+20] != 0x45 || !bytes.Equal(m.mem[4096+32:4096+36], gids[1][12:]) {
		t.Errorf("received %x", m.mem[4096:4096+45])
	}
}

// The doorbell must repeat the last WQE's ctrl segment; a record moved
// without a doorbell is reported; flags the provider must never set.
func TestViolations(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.newCQ(15, -1)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	a.rts(b, 0)
	b.rts(a, 0)
	e.wantViolations = []string{"does not repeat the ctrl segment", "with no doorbell rung", "scatter-to-CQE"}
	bell := a.write(&wqe{op: uapi.MLX5_OPCODE_NOP, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE})
	bell[3] ^= 0xff
	a.ringSend(bell)
	c := q.wait() // run anyway, once the record is found without a good doorbell
	if counter(c) != 0 {
		t.Errorf("%x", c)
	}
	if _, err := e.tryQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16, func(r *uapi.Mlx5IBCreateQP) {
		r.Flags |= uapi.MLX5_QP_FLAG_SCATTER_CQE
	}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("scatter-to-CQE: %v", err)
	}
	if v := e.d.Violations(); len(v) != 3 {
		t.Errorf("violations: %q", v)
	}
}

// Every QP of a context rings one half of one blue-flame register with
// 8-byte doorbells (provider/mlx5's ringSend); the model takes doorbells
// from two QPs on that half, and flags a blue-flame copy (a WQE written
// into the register past the doorbell's 8 bytes) into it, the one write
// a shared half must not take.
func TestSharedHalfTakesOnlyDoorbells(t *testing.T) {
	e := newEnv(t, Options{})
	q := e.newCQ(15, -1)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	a.rts(b, 0)
	b.rts(a, 0)
	if a.bfOff != b.bfOff || &a.uar[0] != &b.uar[0] {
		t.Fatalf("the QPs ring different registers (%#x, %#x)", a.bfOff, b.bfOff)
	}
	nop := func() *wqe { return &wqe{op: uapi.MLX5_OPCODE_NOP, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE} }
	// Both QPs' WQEs posted, then both doorbells on the one half: the
	// second overwrites the first before the device looks, and still
	// both QPs' WQEs run (the device takes each 8-byte write; the model
	// sweeps the page's other QPs to their doorbell records).
	ba, bb := a.write(nop()), b.write(nop())
	store32BE(unsafe.Pointer(&a.db[4]), a.post&0xffff)
	store32BE(unsafe.Pointer(&b.db[4]), b.post&0xffff)
	ring(a.uar, a.bfOff, ba)
	ring(b.uar, b.bfOff, bb)
	got := map[uint32]bool{}
	for range 2 {
		got[sopQPN(q.wait())&0xffffff] = true
	}
	if !got[a.qpn] || !got[b.qpn] {
		t.Fatalf("completions for QPs %v, want %#x and %#x", got, a.qpn, b.qpn)
	}
	if v := e.d.Violations(); len(v) != 0 {
		t.Fatalf("8-byte doorbells of two QPs on one half: %q", v)
	}
	// A blue-flame copy: the whole 64-byte WQE written into the half.
	e.wantViolations = []string{"a shared half takes 8-byte doorbells only"}
	w := nop().inline(bytes.Repeat([]byte{0xab}, 44)) // 16 + 4 + 44: one whole basic block
	idx := a.post & (a.sqCnt - 1)
	bell := a.write(w)
	store32BE(unsafe.Pointer(&a.db[4]), a.post&0xffff)
	for i := 8; i < 64; i += 8 {
		ring(a.uar, a.bfOff+i, [8]byte(a.sq[int(idx)*64+i:]))
	}
	ring(a.uar, a.bfOff, bell)
	q.wait()
	// The model's scan may come while the copy is under way (a slow
	// host, the race detector) and flag it in parts, each naming the
	// words written since the last; the last part reaches the half's end.
	v := e.d.Violations()
	for _, s := range v {
		if !strings.Contains(s, "into register half 0x800") || !strings.Contains(s, fmt.Sprintf("%#x", b.qpn)) {
			t.Errorf("violation %q, want a blue-flame copy into half 0x800 naming both QPs", s)
		}
	}
	if len(v) == 0 || !strings.Contains(v[len(v)-1], "blue-flame copy of 64 bytes") {
		t.Errorf("violations %q, want the blue-flame copy flagged, its last part reaching byte 64", v)
	}
}

// A kernel without dynamic UARs: static pages, the kernel's register in
// the QP's response, CQ arms on page 0.
func TestStaticUAR(t *testing.T) {
	e := newEnv(t, Options{StaticUAR: true})
	if e.resp.TotBfregs != 16 {
		t.Fatalf("tot_bfregs %d", e.resp.TotBfregs)
	}
	if _, err := kverbs.AllocUAR(e.conn, uapi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC); !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Errorf("UAR object on an old kernel: %v", err)
	}
	ch := e.channel()
	q := e.newCQ(15, ch)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	if a.bfreg < 1+4 || a.bfreg >= 16 || a.bfreg == b.bfreg {
		t.Errorf("registers %d, %d", a.bfreg, b.bfreg)
	}
	a.rts(b, 0)
	b.rts(a, 0)
	q.arm(false, e.nc)
	a.send(&wqe{op: uapi.MLX5_OPCODE_NOP, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE})
	q.wait()
	if h, ok := readEvent(t, ch); !ok || h != q.user {
		t.Errorf("event %#x %v", h, ok)
	}
	r := Options{StaticUAR: true, RefuseDynUAR: true}
	d := New(r)
	defer d.Close()
	c, _ := d.NewContext()
	defer unix.Close(c.FD())
	conn := transport.NewKernelConn(c.FD(), uapi.RDMA_DRIVER_MLX5, c)
	req := uapi.Mlx5IBAllocUcontextReqV2{TotalNumBfregs: 16, LibCaps: uapi.MLX5_LIB_CAP_DYN_UAR}
	var resp uapi.Mlx5IBAllocUcontextResp
	if _, err := kverbs.GetContext(conn, structBytes(&req), structBytes(&resp)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("RefuseDynUAR: %v", err)
	}
}

// cqe_version 0: QPs carry user index 0xffffff, CQEs name them by QPN.
func TestCQEVersion0(t *testing.T) {
	e := newEnv(t, Options{CQEVersion0: true})
	if e.resp.CQEVersion != 0 {
		t.Fatalf("cqe_version %d", e.resp.CQEVersion)
	}
	q := e.newCQ(7, -1)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, q, q, 16, 4, 16)
	a.rts(b, 0)
	b.rts(a, 0)
	a.send(&wqe{op: uapi.MLX5_OPCODE_NOP, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE})
	if c := q.wait(); uidxOf(c) != 0 || sopQPN(c)&0xffffff != a.qpn {
		t.Errorf("%x", c)
	}
}

// Completion events the application has not read when a CQ is destroyed
// are not reported; those it read are.
func TestDestroyCountsReadEvents(t *testing.T) {
	e := newEnv(t, Options{})
	ch := e.channel()
	q := e.newCQ(15, ch)
	other := e.newCQ(15, -1)
	a := e.newQP(uapi.IB_UVERBS_QPT_RC, q, other, 16, 4, 16)
	b := e.newQP(uapi.IB_UVERBS_QPT_RC, other, other, 16, 4, 16)
	a.rts(b, 0)
	b.rts(a, 0)
	for i := 0; i < 2; i++ {
		q.arm(false, e.nc)
		a.send(&wqe{op: uapi.MLX5_OPCODE_NOP, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE})
		q.wait()
		if i == 0 {
			if _, ok := readEvent(t, ch); !ok {
				t.Fatal("no event")
			}
			q.sn++
		}
	}
	time.Sleep(10 * time.Millisecond)
	kverbs.DestroyQP(e.conn, a.handle)
	ev, err := kverbs.DestroyCQ(e.conn, q.handle)
	if err != nil || ev.Comp != 1 {
		t.Errorf("destroy: %+v %v, want 1 completion event reported (1 read, 1 not)", ev, err)
	}
}

// Closing the fd releases the context, as the kernel does.
func TestFDCloseReleases(t *testing.T) {
	d := New(Options{})
	defer d.Close()
	c, err := d.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(c.FD())
	deadline := time.Now().Add(2 * time.Second)
	for {
		d.mu.Lock()
		n := len(d.ctxs)
		d.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the context outlived its fd")
		}
		time.Sleep(time.Millisecond)
	}
	if e := c.Ioctl(unsafe.Pointer(&[64]byte{})); e != unix.EINVAL && e != unix.EIO {
		t.Errorf("ioctl after release: %v", e)
	}
}
