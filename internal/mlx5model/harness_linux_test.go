package mlx5model

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// The tests here play the provider by hand: the control path through
// transport.NewKernelConn and internal/kverbs, the rings written and read
// byte by byte, so the model is checked without the provider it checks.

// env is one model device and one context on it.
type env struct {
	t    *testing.T
	d    *Device
	c    *Context
	conn *transport.Conn
	resp uapi.Mlx5IBAllocUcontextResp
	kc   kverbs.Context
	nc   []byte // the UAR page for arm doorbells
	bf   []byte // the UAR page for send doorbells
	ncID uint32
	bfID uint32
	pd   uint32
	// wantViolations lists substrings of the violations the test expects;
	// any other fails it.
	wantViolations []string
	unmap          [][]byte // freed after the device: it may still touch them
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	d := New(opts)
	e := &env{t: t, d: d}
	t.Cleanup(func() {
		d.Close()
		for _, m := range e.unmap {
			unix.Munmap(m)
		}
		for _, v := range d.Violations() {
			expected := false
			for _, w := range e.wantViolations {
				expected = expected || strings.Contains(v, w)
			}
			if !expected {
				t.Errorf("violation: %s", v)
			}
		}
	})
	e.c, e.conn = e.open()
	req := uapi.Mlx5IBAllocUcontextReqV2{
		TotalNumBfregs: 16, NumLowLatencyBfregs: 4, MaxCQEVersion: 1,
		LibCaps: uapi.MLX5_LIB_CAP_4K_UAR | uapi.MLX5_LIB_CAP_DYN_UAR,
	}
	var err error
	if e.kc, err = kverbs.GetContext(e.conn, structBytes(&req), structBytes(&e.resp)); err != nil {
		t.Fatalf("get context: %v", err)
	}
	fd, err := kverbs.AsyncEventAlloc(e.conn)
	if err != nil {
		t.Fatalf("async event alloc: %v", err)
	}
	e.kc.AsyncFD = fd
	t.Cleanup(func() { unix.Close(fd) })
	if e.resp.TotBfregs == 0 {
		e.nc, e.ncID = e.allocUAR(uapi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC)
		e.bf, e.bfID = e.allocUAR(uapi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF)
	} else {
		e.nc = e.mmap(0)
	}
	if e.pd, err = kverbs.AllocPD(e.conn); err != nil {
		t.Fatalf("alloc pd: %v", err)
	}
	return e
}

// open opens a context and its Conn, closed at the end of the test.
func (e *env) open() (*Context, *transport.Conn) {
	c, err := e.d.NewContext()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		c.Close()
		unix.Close(c.FD())
	})
	return c, transport.NewKernelConn(c.FD(), uapi.RDMA_DRIVER_MLX5, c)
}

func (e *env) mmap(off int64) []byte {
	m, err := unix.Mmap(e.c.FD(), off, uarPageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		e.t.Fatalf("mmap UAR at %#x: %v", off, err)
	}
	e.t.Cleanup(func() { unix.Munmap(m) })
	return m
}

func (e *env) allocUAR(typ uint32) ([]byte, uint32) {
	u, err := kverbs.AllocUAR(e.conn, typ)
	if err != nil {
		e.t.Fatalf("alloc UAR: %v", err)
	}
	if u.MmapLength != uarPageSize {
		e.t.Fatalf("UAR of %d bytes", u.MmapLength)
	}
	return e.mmap(int64(u.MmapOffset)), u.PageID
}

// dma maps n bytes of zeroed memory outside the Go heap.
func (e *env) dma(n int) []byte {
	n = (n + uarPageSize - 1) &^ (uarPageSize - 1)
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		e.t.Fatal(err)
	}
	e.unmap = append(e.unmap, m)
	return m
}

// ring stores an 8-byte doorbell (its bytes in memory order) to a UAR.
func ring(uar []byte, off int, b [8]byte) {
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&uar[off])), binary.NativeEndian.Uint64(b[:]))
}

// tcq is a CQ the test polls by hand.
type tcq struct {
	e      *env
	handle uint32
	cqn    uint32
	n      uint32
	size   uint32
	buf    []byte
	db     []byte
	ci     uint32
	sn     uint32
	user   uint64
}

var users uint64

func (e *env) newCQ(cqe uint32, channel int) *tcq {
	e.t.Helper()
	q, err := e.tryCQ(cqe, channel, 64, func(*uapi.Mlx5IBCreateCQ) {})
	if err != nil {
		e.t.Fatalf("create cq: %v", err)
	}
	return q
}

func (e *env) tryCQ(cqe uint32, channel int, size uint32, edit func(*uapi.Mlx5IBCreateCQ)) (*tcq, error) {
	n := uint32(roundPow2(uint64(cqe) + 1))
	users++
	q := &tcq{e: e, n: n, size: size, buf: e.dma(int(n * size)), db: e.dma(64)[:8], user: 0x1000 + users}
	for i := uint32(0); i < n; i++ {
		q.buf[i*size+size-1] = uapi.MLX5_CQE_INVALID << 4
	}
	req := uapi.Mlx5IBCreateCQ{BufAddr: uapi.NewPointer(unsafe.Pointer(&q.buf[0])),
		DbAddr: uapi.NewPointer(unsafe.Pointer(&q.db[0])), CQESize: size}
	if e.ncID != 0 {
		req.Flags = uapi.MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX
		req.UARPageIndex = uint16(e.ncID)
	}
	edit(&req)
	var resp uapi.Mlx5IBCreateCQResp
	k, err := kverbs.CreateCQ(e.conn, kverbs.CQReq{CQE: n - 1, UserHandle: q.user, Channel: channel},
		structBytes(&req), structBytes(&resp))
	if err != nil {
		return nil, err
	}
	if k.CQE != n-1 {
		e.t.Errorf("create cq of %d: the kernel says %d entries, want %d", cqe, k.CQE, n-1)
	}
	q.handle, q.cqn = k.Handle, resp.Cqn
	return q, nil
}

// poll returns the next CQE (its 64 bytes, copied), or nil.
func (q *tcq) poll() []byte {
	off := (q.ci&(q.n-1))*q.size + q.size - 64
	c := q.buf[off : off+64]
	w := atomic.LoadUint32((*uint32)(unsafe.Pointer(&c[60])))
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], w)
	oo := b[3]
	if oo>>4 == uapi.MLX5_CQE_INVALID || uint32(oo&1) != (q.ci/q.n)&1 {
		return nil
	}
	out := append([]byte(nil), c...)
	q.ci++
	binary.BigEndian.PutUint32(q.db[0:], q.ci&0xffffff)
	return out
}

// wait polls for the next CQE for up to 5 s.
func (q *tcq) wait() []byte {
	q.e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if c := q.poll(); c != nil {
			return c
		}
		time.Sleep(100 * time.Microsecond)
	}
	q.e.t.Fatalf("CQ %#x: no CQE in 5 s (stats %+v)", q.cqn, q.e.d.Stats())
	return nil
}

// empty checks that no CQE comes within a short while.
func (q *tcq) empty(why string) {
	q.e.t.Helper()
	time.Sleep(20 * time.Millisecond)
	if c := q.poll(); c != nil {
		q.e.t.Errorf("%s: an unexpected CQE: %x", why, c)
	}
}

// arm arms the CQ as the provider does: the doorbell record, then the UAR.
func (q *tcq) arm(solicited bool, uar []byte) {
	cmd := uint32(uapi.MLX5_CQ_DB_REQ_NOT)
	if solicited {
		cmd = uapi.MLX5_CQ_DB_REQ_NOT_SOL
	}
	w := (q.sn&3)<<28 | cmd | q.ci&0xffffff
	binary.BigEndian.PutUint32(q.db[4:], w)
	var b [8]byte
	binary.BigEndian.PutUint32(b[0:], w)
	binary.BigEndian.PutUint32(b[4:], q.cqn)
	ring(uar, uarCQDoorbel, b)
}

// cqe accessors.
func opcode(c []byte) uint8    { return c[63] >> 4 }
func syndrome(c []byte) uint8  { return c[errCQESyndrome] }
func byteCnt(c []byte) uint32  { return binary.BigEndian.Uint32(c[cqeByteCnt:]) }
func counter(c []byte) uint16  { return binary.BigEndian.Uint16(c[cqeWQECounter:]) }
func sopQPN(c []byte) uint32   { return binary.BigEndian.Uint32(c[cqeSopDropQPN:]) }
func uidxOf(c []byte) uint32   { return binary.BigEndian.Uint32(c[cqeSRQNUIdx:]) & 0xffffff }
func immOf(c []byte) uint32    { return binary.BigEndian.Uint32(c[cqeImmInvalPKey:]) }
func rqpnOf(c []byte) uint32   { return binary.BigEndian.Uint32(c[cqeFlagsRQPN:]) }
func solicitd(c []byte) bool   { return c[63]&2 != 0 }
func errOpQPN(c []byte) uint32 { return binary.BigEndian.Uint32(c[errCQEOpcodeQPN:]) }

// tqp is a QP the test posts to by hand.
type tqp struct {
	e      *env
	handle uint32
	qpn    uint32
	uidx   uint32
	typ    uint8
	sqCnt  uint32
	rqCnt  uint32
	rqSz   uint32
	buf    []byte
	sq     []byte
	rq     []byte
	db     []byte
	post   uint32 // basic blocks posted
	rhead  uint32
	bfOff  int
	bfreg  uint32
	uar    []byte
}

func (e *env) newQP(typ uint8, send, recv *tcq, sqCnt, rqCnt, rqSz uint32) *tqp {
	e.t.Helper()
	q, err := e.tryQP(typ, send, recv, sqCnt, rqCnt, rqSz, func(*uapi.Mlx5IBCreateQP) {})
	if err != nil {
		e.t.Fatalf("create qp: %v", err)
	}
	return q
}

var uidxs uint32

func (e *env) tryQP(typ uint8, send, recv *tcq, sqCnt, rqCnt, rqSz uint32, edit func(*uapi.Mlx5IBCreateQP)) (*tqp, error) {
	uidxs++
	q := &tqp{e: e, typ: typ, sqCnt: sqCnt, rqCnt: rqCnt, rqSz: rqSz, uidx: uidxs, uar: e.bf, bfOff: uarBFOffset}
	rqBytes := int(rqCnt * rqSz)
	q.buf = e.dma(rqBytes + int(sqCnt)*64)
	q.rq, q.sq = q.buf[:rqBytes], q.buf[rqBytes:rqBytes+int(sqCnt)*64]
	q.db = e.dma(64)[:8]
	shift := uint32(0)
	for 1<<shift < rqSz {
		shift++
	}
	req := uapi.Mlx5IBCreateQP{BufAddr: uapi.NewPointer(unsafe.Pointer(&q.buf[0])), DbAddr: uapi.NewPointer(unsafe.Pointer(&q.db[0])),
		SqWqeCount: sqCnt, RqWqeCount: rqCnt, RqWqeShift: shift, UIDX: q.uidx}
	if e.resp.CQEVersion == 0 {
		req.UIDX = 0xffffff
	}
	if e.bfID != 0 {
		req.Flags |= uapi.MLX5_QP_FLAG_UAR_PAGE_INDEX
		req.BfregIndex = e.bfID
	}
	edit(&req)
	var resp uapi.Mlx5IBCreateQPResp
	k, err := kverbs.CreateQP(e.conn, kverbs.QPReq{PD: e.pd, SendCQ: send.handle, RecvCQ: recv.handle, Type: typ,
		Cap: kverbs.QPCap{MaxSendWR: sqCnt / 2, MaxRecvWR: rqCnt, MaxSendSGE: 2, MaxRecvSGE: rqSz / 16, MaxInlineData: 128}},
		structBytes(&req), structBytes(&resp))
	if err != nil {
		return nil, err
	}
	q.handle, q.qpn, q.bfreg = k.Handle, k.QPN, resp.BfregIndex
	if e.bfID == 0 { // static: the register the kernel picked
		q.uar = e.mmap(int64(q.bfreg / bfRegsPerUAR * uarPageSize))
		q.bfOff = uarBFOffset + int(q.bfreg%bfRegsPerUAR)*bfRegSize
	}
	return q, nil
}

func (q *tqp) modify(m uapi.IBUverbsModifyQP) error {
	m.QPHandle = q.handle
	return kverbs.ModifyQP(q.e.conn, &m)
}

// rts brings q to RTS, connected to peer (RC) or with qkey (UD).
func (q *tqp) rts(peer *tqp, qkey uint32) {
	q.e.t.Helper()
	all := uint32(uapi.IB_UVERBS_ACCESS_LOCAL_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_WRITE | uapi.IB_UVERBS_ACCESS_REMOTE_READ |
		uapi.IB_UVERBS_ACCESS_REMOTE_ATOMIC)
	steps := []uapi.IBUverbsModifyQP{
		{AttrMask: maskState | maskPKeyIndex | maskPort | maskAccessFlags, QPState: qpsInit, PortNum: 1, QPAccessFlags: all},
		{AttrMask: maskState | maskAV | maskPathMTU | maskDestQPN | maskRQPSN | maskMaxDestRdAtomic | maskMinRNRTimer,
			QPState: qpsRTR, PathMTU: 3, RqPSN: 100, MaxDestRdAtomic: 4, MinRnrTimer: 1,
			Dest: uapi.IBUverbsQPDest{Dgid: gids[1], SgidIndex: 1, IsGlobal: 1, PortNum: 1, HopLimit: 64}},
		{AttrMask: maskState | maskSQPSN | maskTimeout | maskRetryCnt | maskRNRRetry | maskMaxQPRdAtomic,
			QPState: qpsRTS, SqPSN: 100, Timeout: 14, RetryCnt: 7, RnrRetry: 7, MaxRdAtomic: 4},
	}
	if q.typ == uapi.IB_UVERBS_QPT_UD {
		steps = []uapi.IBUverbsModifyQP{
			{AttrMask: maskState | maskPKeyIndex | maskPort | maskQKey, QPState: qpsInit, PortNum: 1, Qkey: qkey},
			{AttrMask: maskState, QPState: qpsRTR},
			{AttrMask: maskState | maskSQPSN, QPState: qpsRTS, SqPSN: 1},
		}
	} else {
		steps[1].DestQPNum = peer.qpn
	}
	for _, m := range steps {
		if err := q.modify(m); err != nil {
			q.e.t.Fatalf("QP %#x to %d: %v", q.qpn, m.QPState, err)
		}
	}
}

// wqe is a send WQE being built: its 16-byte segments.
type wqe struct {
	op   uint8
	fm   uint8
	imm  uint32
	segs [][16]byte
}

func (w *wqe) raddr(addr uint64, rkey uint32) *wqe {
	var s [16]byte
	binary.BigEndian.PutUint64(s[0:], addr)
	binary.BigEndian.PutUint32(s[8:], rkey)
	w.segs = append(w.segs, s)
	return w
}

func (w *wqe) data(addr uint64, n, lkey uint32) *wqe {
	var s [16]byte
	binary.BigEndian.PutUint32(s[0:], n)
	binary.BigEndian.PutUint32(s[4:], lkey)
	binary.BigEndian.PutUint64(s[8:], addr)
	w.segs = append(w.segs, s)
	return w
}

func (w *wqe) inline(b []byte) *wqe {
	all := make([]byte, (4+len(b)+15)&^15)
	binary.BigEndian.PutUint32(all, uint32(len(b))|uapi.MLX5_INLINE_SEG)
	copy(all[4:], b)
	for i := 0; i < len(all); i += 16 {
		w.segs = append(w.segs, [16]byte(all[i:i+16]))
	}
	return w
}

func (w *wqe) raw(b []byte) *wqe {
	for i := 0; i < len(b); i += 16 {
		w.segs = append(w.segs, [16]byte(b[i:i+16]))
	}
	return w
}

// write puts w at the send queue's producer index (wrapping), without
// ringing; it returns the ctrl segment's first 8 bytes.
func (q *tqp) write(w *wqe) [8]byte {
	ds := uint32(1 + len(w.segs))
	idx := q.post
	var ctrl [16]byte
	binary.BigEndian.PutUint32(ctrl[0:], (idx&0xffff)<<8|uint32(w.op))
	binary.BigEndian.PutUint32(ctrl[4:], q.qpn<<8|ds)
	ctrl[11] = w.fm
	binary.BigEndian.PutUint32(ctrl[12:], w.imm)
	off := int(idx&(q.sqCnt-1)) * 64
	for _, s := range append([][16]byte{ctrl}, w.segs...) {
		if off == len(q.sq) {
			off = 0
		}
		copy(q.sq[off:], s[:])
		off += 16
	}
	q.post += (ds*16 + 63) / 64
	return [8]byte(ctrl[:8])
}

// ringSend publishes posted WQEs: the record, then the doorbell.
func (q *tqp) ringSend(bell [8]byte) {
	store32BE(unsafe.Pointer(&q.db[4]), q.post&0xffff)
	ring(q.uar, q.bfOff, bell)
}

// send writes and rings one WQE.
func (q *tqp) send(w *wqe) { q.ringSend(q.write(w)) }

// recv posts one receive of the given segments.
func (q *tqp) recv(segs ...[16]byte) {
	idx := q.rhead & (q.rqCnt - 1)
	w := q.rq[idx*q.rqSz : (idx+1)*q.rqSz]
	clear(w)
	for i, s := range segs {
		copy(w[i*16:], s[:])
	}
	if len(segs)*16 < len(w) {
		binary.BigEndian.PutUint32(w[len(segs)*16+4:], uapi.MLX5_INVALID_LKEY)
	}
	q.rhead++
	store32BE(unsafe.Pointer(&q.db[0]), q.rhead&0xffff)
}

func seg(addr uint64, n, lkey uint32) [16]byte {
	var s [16]byte
	binary.BigEndian.PutUint32(s[0:], n)
	binary.BigEndian.PutUint32(s[4:], lkey)
	binary.BigEndian.PutUint64(s[8:], addr)
	return s
}

// tmr is registered memory.
type tmr struct {
	mem  []byte
	key  uint32
	addr uint64
}

func (e *env) reg(n int, access uint32) *tmr {
	e.t.Helper()
	mem := e.dma(n)
	p := unsafe.Pointer(&mem[0])
	r, err := kverbs.RegMR(e.conn, e.pd, p, uint64(len(mem)), uint64(uintptr(p)), access)
	if err != nil {
		e.t.Fatalf("reg mr: %v", err)
	}
	if r.LKey != r.RKey {
		e.t.Errorf("lkey %#x, rkey %#x: mlx5 gives one key", r.LKey, r.RKey)
	}
	return &tmr{mem: mem, key: r.LKey, addr: uint64(uintptr(p))}
}

// readEvent reads one completion event from a channel fd within 2 s.
func readEvent(t *testing.T, fd int) (uint64, bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	var b [8]byte
	for time.Now().Before(deadline) {
		n, err := unix.Read(fd, b[:])
		if err == nil && n == 8 {
			return binary.NativeEndian.Uint64(b[:]), true
		}
		if !errors.Is(err, unix.EAGAIN) {
			t.Fatalf("read event: %v", err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	return 0, false
}

// noEvent checks that no event is queued on a channel fd.
func noEvent(t *testing.T, fd int, why string) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	var b [8]byte
	if n, err := unix.Read(fd, b[:]); err == nil {
		t.Errorf("%s: an event came (%d bytes: %x)", why, n, b[:n])
	}
}

// channel creates a completion channel, non-blocking.
func (e *env) channel() int {
	e.t.Helper()
	fd, err := kverbs.CreateCompChannel(e.conn)
	if err != nil {
		e.t.Fatalf("create comp channel: %v", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { unix.Close(fd) })
	return fd
}
