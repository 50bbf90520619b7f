package mlx5model

import (
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// tsrq is an SRQ the test posts to by hand.
type tsrq struct {
	e       *env
	handle  uint32
	srqn    uint32
	user    uint64
	cnt     uint32
	stride  uint32
	buf, db []byte
	head    uint32 // the next WQE to post
	counter uint32
	k       kverbs.SRQ
}

// newSRQBufs lays out an SRQ of maxWR receives of maxSGE SGEs as
// mlx5_ib sizes it, every WQE linked to the next.
func (e *env) newSRQBufs(maxWR, maxSGE uint32) *tsrq {
	users++
	s := &tsrq{e: e, user: 0x5000 + users, cnt: uint32(roundPow2(uint64(maxWR) + 1))}
	s.stride = max(uint32(roundPow2(uint64(16+16*maxSGE))), 32)
	s.buf, s.db = e.dma(int(s.cnt*s.stride)), e.dma(64)[:4]
	for i := uint32(0); i < s.cnt; i++ {
		binary.BigEndian.PutUint16(s.buf[i*s.stride+2:], uint16((i+1)&(s.cnt-1)))
	}
	return s
}

func (s *tsrq) req() uapi.Mlx5IBCreateSRQ {
	return uapi.Mlx5IBCreateSRQ{BufAddr: uapi.NewPointer(unsafe.Pointer(&s.buf[0])), DbAddr: uapi.NewPointer(unsafe.Pointer(&s.db[0]))}
}

// trySRQ creates an SRQ by the SRQ_CREATE ioctl, with its driver data
// edited.
func (e *env) trySRQ(maxWR, maxSGE uint32, edit func(*uapi.Mlx5IBCreateSRQ)) (*tsrq, error) {
	s := e.newSRQBufs(maxWR, maxSGE)
	req := s.req()
	edit(&req)
	var resp uapi.Mlx5IBCreateSRQResp
	k, err := kverbs.CreateSRQ(e.conn, kverbs.SRQReq{PD: e.pd, UserHandle: s.user, MaxWR: maxWR, MaxSGE: maxSGE},
		structBytes(&req), structBytes(&resp))
	if err != nil {
		return nil, err
	}
	s.handle, s.srqn, s.k = k.Handle, resp.Srqn, k
	return s, nil
}

// post posts one receive of the given segments at the list's head.
func (s *tsrq) post(segs ...[16]byte) uint32 {
	i := s.head
	w := s.buf[i*s.stride : (i+1)*s.stride]
	s.head = uint32(binary.BigEndian.Uint16(w[2:]))
	d := w[16:]
	clear(d)
	for k, g := range segs {
		copy(d[k*16:], g[:])
	}
	if len(segs)*16 < len(d) {
		binary.BigEndian.PutUint32(d[len(segs)*16+4:], uapi.MLX5_INVALID_LKEY)
	}
	s.counter++
	store32BE(unsafe.Pointer(&s.db[0]), s.counter)
	return i
}

// qpOn creates an RC QP that receives through s.
func (e *env) qpOn(s *tsrq, send, recv *tcq, edit func(*uapi.Mlx5IBCreateQP)) (*tqp, kverbs.QP, error) {
	uidxs++
	q := &tqp{e: e, typ: uapi.IB_UVERBS_QPT_RC, sqCnt: 4, uidx: uidxs, uar: e.bf, bfOff: uarBFOffset}
	q.buf = e.dma(4 * 64)
	q.sq, q.db = q.buf, e.dma(64)[:8]
	req := uapi.Mlx5IBCreateQP{BufAddr: uapi.NewPointer(unsafe.Pointer(&q.buf[0])), DbAddr: uapi.NewPointer(unsafe.Pointer(&q.db[0])),
		SqWqeCount: 4, UIDX: q.uidx}
	if e.resp.CQEVersion == 0 {
		req.UIDX = 0xffffff
	}
	if e.bfID != 0 {
		req.Flags |= uapi.MLX5_QP_FLAG_UAR_PAGE_INDEX
		req.BfregIndex = e.bfID
	}
	edit(&req)
	var resp uapi.Mlx5IBCreateQPResp
	k, err := kverbs.CreateQP(e.conn, kverbs.QPReq{PD: e.pd, SendCQ: send.handle, RecvCQ: recv.handle, Type: q.typ,
		SRQ: s.handle, HasSRQ: true, Cap: kverbs.QPCap{MaxSendWR: 2, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 2}},
		structBytes(&req), structBytes(&resp))
	if err != nil {
		return nil, k, err
	}
	q.handle, q.qpn = k.Handle, k.QPN
	if e.bfID == 0 {
		q.uar = e.mmap(int64(resp.BfregIndex / bfRegsPerUAR * uarPageSize))
		q.bfOff = uarBFOffset + int(resp.BfregIndex%bfRegsPerUAR)*bfRegSize
	}
	return q, k, nil
}

// SRQ creation, modify, query and destroy answer as mlx5_ib does.
func TestSRQControlPath(t *testing.T) {
	e := newEnv(t, Options{})
	s, err := e.trySRQ(100, 2, func(*uapi.Mlx5IBCreateSRQ) {})
	if err != nil {
		t.Fatal(err)
	}
	if s.k.MaxWR != 127 || s.k.MaxSGE != 2 || s.srqn == 0 {
		t.Errorf("create: max_wr %d (want 127), max_sge %d (want 2), srqn %#x", s.k.MaxWR, s.k.MaxSGE, s.srqn)
	}
	for _, c := range []struct {
		why     string
		wr, sge uint32
		edit    func(*uapi.Mlx5IBCreateSRQ)
		want    error
	}{
		{"max_wr at 2^log_max_srq_sz", maxQPWR, 1, nil, unix.EINVAL},
		{"more SGEs than max_wqe_sz_rq holds", 1, maxRqDesc/16 + 1, nil, unix.EINVAL},
		{"a reserved word", 1, 1, func(r *uapi.Mlx5IBCreateSRQ) { r.Reserved0 = 1 }, unix.EINVAL},
		{"WQE signatures", 1, 1, func(r *uapi.Mlx5IBCreateSRQ) { r.Flags = uapi.MLX5_SRQ_FLAG_SIGNATURE }, unix.EOPNOTSUPP},
		{"a buffer off a 64-byte boundary", 1, 1, func(r *uapi.Mlx5IBCreateSRQ) {
			r.BufAddr = uapi.NewPointer(unsafe.Add(ptrOf(&r.BufAddr), 16))
		}, unix.EINVAL},
		{"no doorbell record", 1, 1, func(r *uapi.Mlx5IBCreateSRQ) { r.DbAddr = uapi.Pointer{} }, unix.EINVAL},
	} {
		edit := c.edit
		if edit == nil {
			edit = func(*uapi.Mlx5IBCreateSRQ) {}
		}
		if _, err := e.trySRQ(c.wr, c.sge, edit); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.why, err, c.want)
		}
	}
	// A buffer the process does not map (unmapped after the test's own
	// mappings were made): EFAULT, as ib_umem_get.
	if _, err := e.trySRQ(1, 1, func(r *uapi.Mlx5IBCreateSRQ) {
		gone, err := unix.Mmap(-1, 0, uarPageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		unix.Munmap(gone)
		r.BufAddr = uapi.NewPointer(unsafe.Pointer(unsafe.SliceData(gone)))
	}); !errors.Is(err, unix.EFAULT) {
		t.Errorf("an unmapped buffer: %v, want EFAULT", err)
	}

	if a, err := kverbs.QuerySRQ(e.conn, s.handle); err != nil || a != (kverbs.SRQAttr{MaxWR: 127, MaxSGE: 2}) {
		t.Errorf("query: %+v, %v", a, err)
	}
	if err := kverbs.ModifySRQ(e.conn, s.handle, kverbs.SRQMaxWR, kverbs.SRQAttr{MaxWR: 200}, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("resize: %v, want EINVAL (mlx5_ib cannot)", err)
	}
	if err := kverbs.ModifySRQ(e.conn, s.handle, kverbs.SRQLimit, kverbs.SRQAttr{Limit: 128}, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a limit of all the WQEs: %v, want EINVAL", err)
	}
	if err := kverbs.ModifySRQ(e.conn, s.handle, kverbs.SRQLimit, kverbs.SRQAttr{Limit: 9}, nil); err != nil {
		t.Errorf("arm at 9: %v", err)
	}
	if a, _ := kverbs.QuerySRQ(e.conn, s.handle); a.Limit != 9 {
		t.Errorf("query after the arm: limit %d, want 9", a.Limit)
	}

	// A QP on it has no receive queue, and holds it (EBUSY).
	cq := e.newCQ(16, -1)
	_, k, err := e.qpOn(s, cq, cq, func(*uapi.Mlx5IBCreateQP) {})
	if err != nil {
		t.Fatal(err)
	}
	if k.Cap.MaxRecvWR != 0 || k.Cap.MaxRecvSGE != 0 {
		t.Errorf("a QP on an SRQ: receive caps %d/%d, want none", k.Cap.MaxRecvWR, k.Cap.MaxRecvSGE)
	}
	if _, err := kverbs.DestroySRQ(e.conn, s.handle); !errors.Is(err, unix.EBUSY) {
		t.Errorf("destroy under a QP: %v, want EBUSY", err)
	}
	if _, err := kverbs.DestroyQP(e.conn, k.Handle); err != nil {
		t.Fatal(err)
	}
	if n, err := kverbs.DestroySRQ(e.conn, s.handle); n != 0 || err != nil {
		t.Errorf("destroy: %d events, %v", n, err)
	}
	if _, _, err := e.qpOn(s, cq, cq, func(*uapi.Mlx5IBCreateQP) {}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a QP on a destroyed SRQ: %v, want EINVAL", err)
	}
}

// What the provider gets wrong in an SRQ's driver data is a violation: a
// free list not in index order, an unknown flag, a user index, a receive
// queue for a QP on an SRQ.
func TestSRQViolations(t *testing.T) {
	e := newEnv(t, Options{})
	e.wantViolations = []string{"free list must start in index order", "knows only MLX5_SRQ_FLAG_SIGNATURE", "user index", "receive WQEs for a QP on an SRQ"}
	s := e.newSRQBufs(7, 1)
	binary.BigEndian.PutUint16(s.buf[2:], 5)
	req := s.req()
	req.Flags, req.UIDX = 2, 3
	var resp uapi.Mlx5IBCreateSRQResp
	k, err := kverbs.CreateSRQ(e.conn, kverbs.SRQReq{PD: e.pd, MaxWR: 7, MaxSGE: 1}, structBytes(&req), structBytes(&resp))
	if err != nil {
		t.Fatal(err)
	}
	s.handle = k.Handle
	cq := e.newCQ(16, -1)
	if _, _, err := e.qpOn(s, cq, cq, func(r *uapi.Mlx5IBCreateQP) { r.RqWqeCount, r.RqWqeShift = 4, 4 }); err != nil {
		t.Fatal(err)
	}
	if got := len(e.d.Violations()); got != 4 {
		t.Errorf("%d violations, want 4: %q", got, e.d.Violations())
	}
}

// The legacy CREATE_SRQ write command makes the same SRQ.
func TestSRQCreateByWrite(t *testing.T) {
	e := newEnv(t, Options{})
	s := e.newSRQBufs(5, 3)
	req := s.req()
	var resp uapi.Mlx5IBCreateSRQResp
	cmd := new(transport.Cmd)
	core := transport.As[uapi.IBUverbsCreateSRQ](cmd.ResetWrite(uapi.IB_USER_VERBS_CMD_CREATE_SRQ, false,
		transport.SizeOf[uapi.IBUverbsCreateSRQ](), transport.SizeOf[uapi.IBUverbsCreateSRQResp]()))
	core.PDHandle, core.UserHandle, core.MaxWR, core.MaxSGE = e.pd, 77, 5, 3
	copy(cmd.WriteUHWIn(int(unsafe.Sizeof(req))), structBytes(&req))
	out := cmd.WriteUHWOut(int(unsafe.Sizeof(resp)))
	if err := e.conn.Invoke(cmd); err != nil {
		t.Fatal(err)
	}
	r := transport.As[uapi.IBUverbsCreateSRQResp](cmd.CoreOut())
	copy(structBytes(&resp), out)
	if r.MaxWR != 7 || r.MaxSGE != 3 || resp.Srqn == 0 {
		t.Errorf("CREATE_SRQ: %+v, srqn %#x; want max_wr 7, max_sge 3", *r, resp.Srqn)
	}
	if a, err := kverbs.QuerySRQ(e.conn, r.SRQHandle); err != nil || a.MaxWR != 7 || a.MaxSGE != 3 {
		t.Errorf("query: %+v, %v", a, err)
	}
	if _, err := kverbs.DestroySRQ(e.conn, r.SRQHandle); err != nil {
		t.Error(err)
	}
}

// The HCA takes the SRQ's WQEs in list order, however the provider
// relinked them; each receive CQE names the WQE (wqe_counter) and the QP
// (its user index, or with cqe_version 0 the SRQ's number); an empty SRQ
// makes an RC sender wait; the armed limit fires once.
func TestSRQDataPath(t *testing.T) {
	for _, v0 := range []bool{false, true} {
		e := newEnv(t, Options{CQEVersion0: v0})
		s, err := e.trySRQ(3, 1, func(*uapi.Mlx5IBCreateSRQ) {})
		if err != nil {
			t.Fatal(err)
		}
		scq, rcq := e.newCQ(16, -1), e.newCQ(16, -1)
		r, _, err := e.qpOn(s, scq, rcq, func(*uapi.Mlx5IBCreateQP) {})
		if err != nil {
			t.Fatal(err)
		}
		snd := e.newQP(uapi.IB_UVERBS_QPT_RC, scq, scq, 16, 1, 16)
		snd.rts(r, 0)
		r.rts(snd, 0)
		mr := e.reg(4096, allAccess)
		// Relink: 0 -> 2 -> 1 -> 3 (the tail), as completions out of
		// order would have left it.
		binary.BigEndian.PutUint16(s.buf[0*s.stride+2:], 2)
		binary.BigEndian.PutUint16(s.buf[2*s.stride+2:], 1)
		binary.BigEndian.PutUint16(s.buf[1*s.stride+2:], 3)
		if err := kverbs.ModifySRQ(e.conn, s.handle, kverbs.SRQLimit, kverbs.SRQAttr{Limit: 2}, nil); err != nil {
			t.Fatal(err)
		}
		var order []uint32
		for k := range 3 {
			order = append(order, s.post(seg(mr.addr+uint64(k)*64, 64, mr.key)))
		}
		for k := range 3 {
			snd.send((&wqe{op: uapi.MLX5_OPCODE_SEND, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).data(mr.addr+1024, 8, mr.key))
			scq.wait()
			c := rcq.wait()
			want := r.uidx
			if v0 {
				want = s.srqn
			}
			if op, ctr, who := c[63]>>4, binary.BigEndian.Uint16(c[60:]), binary.BigEndian.Uint32(c[32:]); op != uapi.MLX5_CQE_RESP_SEND || uint32(ctr) != order[k] || who != want {
				t.Errorf("cqe_version 0 %v, receive %d: opcode %d, wqe_counter %d (want %d), srqn_uidx %#x (want %#x)", v0, k, op, ctr, order[k], who, want)
			}
		}
		if want := []uint32{0, 2, 1}; order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
			t.Errorf("posted WQEs %v, want 0 2 1", order)
		}
		if a, _ := kverbs.QuerySRQ(e.conn, s.handle); a.Limit != 0 {
			t.Errorf("limit %d after it fired, want 0", a.Limit)
		}
		var ev [16]byte
		if n, err := unix.Read(e.kc.AsyncFD, ev[:]); err != nil || n != 16 ||
			binary.NativeEndian.Uint64(ev[:]) != s.user || binary.NativeEndian.Uint32(ev[8:]) != eventSRQLimitReached {
			t.Errorf("async event %x (%d, %v), want SRQ_LIMIT_REACHED for %#x", ev, n, err, s.user)
		}
		if n, _ := unix.Read(e.kc.AsyncFD, ev[:]); n > 0 {
			t.Errorf("a second async event %x", ev)
		}
		// Empty: the send waits for a receive.
		snd.send((&wqe{op: uapi.MLX5_OPCODE_SEND, fm: uapi.MLX5_WQE_CTRL_CQ_UPDATE}).data(mr.addr+1024, 8, mr.key))
		scq.empty("a send to an empty SRQ")
		s.post(seg(mr.addr, 64, mr.key))
		scq.wait()
		if c := rcq.wait(); binary.BigEndian.Uint16(c[60:]) != 3 {
			t.Errorf("the receive after RNR used WQE %d, want 3", binary.BigEndian.Uint16(c[60:]))
		}
	}
}
