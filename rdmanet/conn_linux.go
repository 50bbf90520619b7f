package rdmanet

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/rdmacm"
	"github.com/goverbs/goverbs/uverbs"
)

// A work request's ID says what it is: its top two bits the kind, the
// rest the buffer's index, or the one-sided operation's slot.
const (
	tagOp   = 0 << 62 // a one-sided RDMA READ or WRITE in slot i (region_linux.go)
	tagRecv = 1 << 62 // a receive into read buffer i
	tagSend = 2 << 62 // a data message from write buffer i
	tagCtrl = 3 << 62 // a credit or fin message, no buffer
	tagMask = 3 << 62
)

// closeWait bounds how long Close waits for the messages in flight to
// complete before it disconnects, which flushes what is left.
const closeWait = time.Second

// Conn is a byte stream over an RDMA reliable connection: a net.Conn.
// Its methods are safe for concurrent use; Reads are served one at a
// time, and so are Writes. Beside the stream, Register, ReadAt and
// WriteAt reach the peer's memory with RDMA READ and WRITE, many at once
// (region_linux.go).
type Conn struct {
	rc    *rdmacm.Conn
	qp    *uverbs.QP
	cq    *cq.CQ
	ch    *cq.Channel
	buf   *uverbs.Buffer
	mr    *uverbs.MR
	mem   []byte
	base  uint64 // mem's address, as the device sees it
	cfg   Config
	laddr Addr
	raddr Addr

	readMu  sync.Mutex // serialises Reads
	writeMu sync.Mutex // serialises Writes

	// mu guards what follows, and the QP's posts.
	mu sync.Mutex
	// The read side: read buffers holding data not yet read, in arrival
	// order, as a ring over ready; the first of them read up to readOff.
	ready                []readyBuf
	readyHead, readyN    int
	readOff              int
	eof                  bool   // the peer's fin arrived
	owed                 uint16 // receives reposted and not yet handed back to the peer
	creditAt             uint16 // owed this high, a credit message goes unless data carries it
	rwr                  []uverbs.RecvWR
	credits, peerCredits int   // the peer's receives ours to take, and how many it posted
	chunk                int   // the most bytes one message carries: the smaller of the two sides' buffers
	free                 []int // write buffers not in flight
	inflight, sqDepth    int   // messages posted and not completed, and the most there may be
	finWanted, finSent   bool  // CloseWrite or Close asked for a fin; it went
	err                  error
	closed               bool
	wcs                  [16]cq.WC
	swr                  [1]uverbs.SendWR
	ssge                 [1]uverbs.SGE

	// readReady and writeReady wake the Read and Write waiting, if any:
	// something changed. done is closed by Close.
	readReady, writeReady chan struct{}
	done                  chan struct{}
	rtimer, wtimer        *time.Timer
	rdl, wdl              atomic.Int64 // deadlines, UnixNano; 0: none

	reactDone chan struct{}
	// With BusyPoll the goroutines that wait spin on the CQ, and find
	// completions sooner than an event would tell them; an event per
	// completion would cost a wake-up, a system call to re-arm and a fight
	// for mu, on the CPU the peer needs. So the event goroutine leaves the
	// CQ unarmed while nobody is parked (parked counts the waiters that
	// sleep), waiting on reactKick (reactParked) for the first who is.
	parked      int
	reactParked bool
	reactKick   chan struct{}
	closeOnce   sync.Once
	closeErr    error

	// One-sided operations (region_linux.go). ops and opFree are made
	// once, so that an operation allocates nothing; a slot's state, the
	// regions and the bounce memory are guarded by mu.
	ops        []opSlot
	opFree     chan int // the slots not in use
	regions    []*Region
	bounceMu   sync.Mutex // serialises the bounce memory's allocation
	bounce     bounceMem
	rexp, wexp expiry // the deadlines again, as channels many waiters select on
}

type readyBuf struct{ index, n int }

// newConn gives rc, a connection in the making, its registered buffers,
// and posts its receives: called by rdmacm before the connection is made
// (Config.Setup), so that the peer's first message finds a receive.
func newConn(rc *rdmacm.Conn, cfg Config) (*Conn, error) {
	c := &Conn{rc: rc, qp: rc.QP(), cq: rc.CQ(), ch: rc.CompChannel(), cfg: cfg,
		laddr: Addr{rc.LocalAddr()}, raddr: Addr{rc.RemoteAddr()},
		readReady: make(chan struct{}, 1), writeReady: make(chan struct{}, 1), done: make(chan struct{}),
		reactDone: make(chan struct{}), reactKick: make(chan struct{}, 1), sqDepth: streamSends(cfg)}
	c.initOps()
	r, w, bs := cfg.ReadBuffers, cfg.WriteBuffers, cfg.BufferSize
	var err error
	if c.buf, err = uverbs.AllocBuffer((r + w) * bs); err != nil {
		return nil, err
	}
	c.mem = c.buf.Bytes()
	if c.mr, err = rc.PD().RegMR(c.mem, uverbs.AccessLocalWrite); err != nil {
		c.buf.Close()
		return nil, err
	}
	c.base = c.mr.Addr()
	c.ready = make([]readyBuf, r)
	c.rwr = make([]uverbs.RecvWR, r)
	sges := make([]uverbs.SGE, r)
	for i := range c.rwr {
		sges[i] = uverbs.SGE{Addr: c.base + uint64(i*bs), Length: uint32(bs), LKey: c.mr.LKey()}
		c.rwr[i] = uverbs.RecvWR{WRID: tagRecv | uint64(i), SGL: sges[i : i+1]}
	}
	if _, err := c.qp.PostRecv(c.rwr); err != nil {
		c.release()
		return nil, err
	}
	c.free = make([]int, w)
	for i := range c.free {
		c.free[i] = r + i
	}
	c.creditAt = uint16(max(1, r/2))
	c.swr[0].SGL = c.ssge[:]
	c.rtimer, c.wtimer = time.NewTimer(time.Hour), time.NewTimer(time.Hour)
	c.rtimer.Stop()
	c.wtimer.Stop()
	return c, nil
}

// start begins the stream once the peer's hello is known.
func (c *Conn) start(peer hello) {
	c.credits, c.peerCredits = int(peer.credits), int(peer.credits)
	c.chunk = min(c.cfg.BufferSize, int(peer.bufSize))
	go c.react()
}

// release gives back the buffers; the connection is closed.
func (c *Conn) release() {
	c.mr.Close()
	c.buf.Close()
}

// react waits for the CQ's events on the runtime poller and hands what
// completed to the Read and Write waiting.
func (c *Conn) react() {
	defer close(c.reactDone)
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		if c.cfg.BusyPoll > 0 && c.parked == 0 {
			c.reactParked = true
			c.mu.Unlock()
			select {
			case <-c.reactKick:
			case <-c.done:
			}
			continue
		}
		err := c.cq.ReqNotify(cq.NextCompletion)
		if err != nil {
			c.failLocked(err)
		}
		c.progressLocked()
		c.mu.Unlock()
		if err != nil {
			c.wake()
			return
		}
		// No context: one that can end costs the wait allocations each
		// time it parks. Close wakes it with a completion (kickLocked).
		if _, err := c.ch.Wait(context.Background()); err != nil {
			c.mu.Lock()
			if !c.closed {
				c.failLocked(err)
			}
			c.mu.Unlock()
			c.wake()
			return
		}
		c.cq.Ack(1)
	}
}

// kickLocked makes a completion that wakes the event goroutine, for
// Close: the QP in the error state flushes what is posted, and a send
// posted now, which completes at once with a flush. The CQ is armed
// whenever the goroutine waits.
func (c *Conn) kickLocked() {
	if err := c.qp.Modify(&uverbs.QPAttr{State: uverbs.QPErr}, uverbs.QPAttrState); err != nil {
		return
	}
	if c.inflight >= c.sqDepth { // those in flight flush
		return
	}
	wr := &c.swr[0]
	wr.WRID, wr.Opcode, wr.Flags, wr.SGL, wr.Imm = tagCtrl, uverbs.WRSend, uverbs.SendSignaled, nil, 0
	if _, err := c.qp.PostSend(c.swr[:]); err == nil {
		c.inflight++
	}
}

// parkLocked counts a waiter about to sleep, and wakes the event
// goroutine if it left the CQ unarmed: someone must poll for the waiter.
// unparkLocked counts it awake.
func (c *Conn) parkLocked() {
	c.parked++
	if c.reactParked {
		c.reactParked = false
		c.reactKick <- struct{}{}
	}
}

func (c *Conn) unparkLocked() { c.parked-- }

// wake tells the Read and the Write waiting, if any, to look again.
func (c *Conn) wake() {
	select {
	case c.readReady <- struct{}{}:
	default:
	}
	select {
	case c.writeReady <- struct{}{}:
	default:
	}
}

// progressLocked polls the CQ dry and acts on each completion. It
// reports whether anything completed, and wakes the waiters if so.
func (c *Conn) progressLocked() bool {
	any := false
	for {
		n, err := c.cq.Poll(c.wcs[:])
		if err != nil {
			c.failLocked(err)
			any = true
			break
		}
		for i := range n {
			c.completeLocked(&c.wcs[i])
		}
		any = any || n > 0
		if n < len(c.wcs) {
			break
		}
	}
	if any {
		c.sendCtrlLocked()
		c.wake()
	}
	return any
}

// completeLocked acts on one completion.
func (c *Conn) completeLocked(wc *cq.WC) {
	i := int(wc.WRID &^ tagMask)
	switch wc.WRID & tagMask {
	case tagOp:
		c.opCompleteLocked(i, wc.Status)
		return
	case tagSend:
		c.free = append(c.free, i)
		c.inflight--
	case tagCtrl:
		c.inflight--
	case tagRecv:
		if wc.Status == cq.Success {
			c.receivedLocked(i, wc)
			return
		}
	}
	if wc.Status != cq.Success {
		c.failLocked(statusErr(wc.Status))
	}
}

// receivedLocked takes the message that arrived in read buffer i.
func (c *Conn) receivedLocked(i int, wc *cq.WC) {
	if wc.Flags&cq.WithImm == 0 {
		c.failLocked(fmt.Errorf("%w: a message without a header", errProtocol))
		return
	}
	h, err := parseImm(wc.Imm)
	if err != nil {
		c.failLocked(err)
		return
	}
	if c.credits += int(h.credits); c.credits > c.peerCredits {
		c.failLocked(fmt.Errorf("%w: %d credits handed back, %d receives posted", errProtocol, c.credits, c.peerCredits))
		return
	}
	switch {
	case h.kind == kindData && wc.ByteLen > 0 && int(wc.ByteLen) <= c.cfg.BufferSize && !c.eof:
		c.ready[(c.readyHead+c.readyN)%len(c.ready)] = readyBuf{i, int(wc.ByteLen)}
		c.readyN++
	case h.kind != kindData && wc.ByteLen == 0:
		c.eof = c.eof || h.kind == kindFin
		c.repostLocked(i)
	default:
		c.failLocked(fmt.Errorf("%w: a message of kind %d with %d bytes (after fin: %t)", errProtocol, h.kind, wc.ByteLen, c.eof))
	}
}

// repostLocked posts read buffer i again and owes the peer a credit.
func (c *Conn) repostLocked(i int) {
	if _, err := c.qp.PostRecv(c.rwr[i : i+1]); err != nil {
		c.failLocked(err)
		return
	}
	c.owed++
}

// statusErr is the error of a failed completion. A flush, and the
// errors a peer that went away leaves behind (its QP torn down while our
// message was on the wire: a remote operation or invalid request error,
// retries exhausted), mean the connection is gone: ECONNRESET, as a TCP
// peer's death reads. A remote access error means a one-sided operation
// named memory the peer does not grant. Anything else is this side's
// fault: EIO.
func statusErr(s cq.Status) error {
	switch s {
	case cq.WRFlushErr, cq.RemOpErr, cq.RemInvReqErr, cq.RemAbortErr, cq.RetryExcErr, cq.RNRRetryExcErr:
		return fmt.Errorf("connection lost (completion %v): %w", s, unix.ECONNRESET)
	case cq.RemAccessErr:
		return fmt.Errorf("%w (completion %v)", ErrRemoteAccess, s)
	}
	return fmt.Errorf("completion %v: %w", s, unix.EIO)
}

// failLocked records the connection's first error.
func (c *Conn) failLocked(err error) {
	if c.err == nil {
		c.err = err
	}
}

// postLocked posts one message: kind, with the credits owed, and n bytes
// from write buffer slot (slot < 0: none).
func (c *Conn) postLocked(kind uint8, slot, n int) error {
	wr := &c.swr[0]
	wr.Opcode, wr.Flags = uverbs.WRSendWithImm, uverbs.SendSignaled
	wr.Imm = header{kind: kind, credits: c.owed}.imm()
	if slot < 0 {
		wr.WRID, wr.SGL = tagCtrl, nil
	} else {
		wr.WRID, wr.SGL = tagSend|uint64(slot), c.ssge[:]
		c.ssge[0] = uverbs.SGE{Addr: c.base + uint64(slot*c.cfg.BufferSize), Length: uint32(n), LKey: c.mr.LKey()}
	}
	if _, err := c.qp.PostSend(c.swr[:]); err != nil {
		c.failLocked(err)
		return err
	}
	c.credits--
	c.owed = 0
	c.inflight++
	return nil
}

// sendCtrlLocked sends what the peer is owed, if it has to go on its
// own: credits, once enough are owed, and a fin asked for. Control
// messages may take the last credit, which data leaves for them.
func (c *Conn) sendCtrlLocked() {
	if c.err != nil || c.credits < 1 || c.inflight >= c.sqDepth {
		return
	}
	switch {
	case c.finWanted && !c.finSent:
		if c.postLocked(kindFin, -1, 0) == nil {
			c.finSent = true
		}
	case c.owed >= c.creditAt:
		c.postLocked(kindCredit, -1, 0)
	}
}

// Read reads what has arrived, waiting for data if none has: at most
// len(b) bytes, across messages. After the peer's CloseWrite or Close,
// and the bytes before it, it returns io.EOF.
func (c *Conn) Read(b []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case c.closed:
			return 0, c.opErr("read", net.ErrClosed)
		case expired(&c.rdl):
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		case c.readyN > 0:
			n := c.copyOutLocked(b)
			c.sendCtrlLocked()
			return n, nil
		case c.eof:
			return 0, io.EOF
		case c.err != nil:
			return 0, c.opErr("read", c.err)
		case len(b) == 0:
			return 0, nil
		}
		if c.progressLocked() {
			continue
		}
		if err := c.waitLocked(c.readReady, c.rtimer, &c.rdl); err != nil {
			return 0, c.opErr("read", err)
		}
	}
}

// copyOutLocked copies the ready data into b, reposting each read buffer
// it empties.
func (c *Conn) copyOutLocked(b []byte) int {
	n := 0
	for c.readyN > 0 && n < len(b) {
		r := c.ready[c.readyHead]
		off := r.index * c.cfg.BufferSize
		k := copy(b[n:], c.mem[off+c.readOff:off+r.n])
		n += k
		if c.readOff += k; c.readOff < r.n {
			break
		}
		c.readOff = 0
		c.readyHead = (c.readyHead + 1) % len(c.ready)
		c.readyN--
		c.repostLocked(r.index)
	}
	return n
}

// Write copies b into write buffers and posts it, a message per
// buffer's worth, waiting while the peer has no receive for it (flow
// control) or every write buffer is in flight. It returns once every
// byte is in registered memory and posted: the QP delivers it, in order,
// unless the connection fails first.
func (c *Conn) Write(b []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for {
		switch {
		case c.closed:
			return n, c.opErr("write", net.ErrClosed)
		case expired(&c.wdl):
			return n, c.opErr("write", os.ErrDeadlineExceeded)
		case c.finWanted:
			return n, c.opErr("write", fmt.Errorf("write after CloseWrite: %w", unix.EPIPE))
		case c.err != nil:
			return n, c.opErr("write", c.err)
		case n == len(b):
			return n, nil
		case c.credits >= 2 && len(c.free) > 0 && c.inflight < c.sqDepth:
			slot := c.free[len(c.free)-1]
			k := copy(c.mem[slot*c.cfg.BufferSize:slot*c.cfg.BufferSize+c.chunk], b[n:])
			if err := c.postLocked(kindData, slot, k); err != nil {
				return n, c.opErr("write", err)
			}
			c.free = c.free[:len(c.free)-1]
			n += k
			continue
		}
		if c.progressLocked() {
			continue
		}
		if err := c.waitLocked(c.writeReady, c.wtimer, &c.wdl); err != nil {
			return n, c.opErr("write", err)
		}
	}
}

// waitLocked waits, without mu, until ready is signalled, the deadline
// dl passes (os.ErrDeadlineExceeded), or the Conn closes. With BusyPoll
// it polls the CQ that long first.
func (c *Conn) waitLocked(ready chan struct{}, t *time.Timer, dl *atomic.Int64) error {
	d := dl.Load()
	var left time.Duration
	if d != 0 {
		if left = time.Until(time.Unix(0, d)); left <= 0 {
			return os.ErrDeadlineExceeded
		}
	}
	if c.cfg.BusyPoll > 0 {
		for end := time.Now().Add(c.cfg.BusyPoll); time.Now().Before(end); {
			c.mu.Unlock()
			runtime.Gosched()
			c.mu.Lock()
			if c.progressLocked() || c.closed {
				return nil
			}
		}
	}
	var tc <-chan time.Time
	if d != 0 {
		t.Reset(left)
		tc = t.C
	}
	c.parkLocked()
	c.mu.Unlock()
	select {
	case <-ready:
	case <-tc:
	case <-c.done:
	}
	if tc != nil {
		t.Stop()
	}
	c.mu.Lock()
	c.unparkLocked()
	return nil
}

// CloseWrite sends the peer a fin after the bytes written: its Reads
// return io.EOF once they have those. Reads here go on; Writes fail.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return c.opErr("close", net.ErrClosed)
	case c.err != nil:
		return c.opErr("close", c.err)
	}
	c.finWanted = true
	c.sendCtrlLocked()
	return nil
}

// Close sends a fin, waits up to a second for the messages in flight,
// then disconnects and gives back the connection's memory. Reads and
// Writes waiting end with net.ErrClosed. A second Close returns an error
// wrapping net.ErrClosed.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.mu.Lock()
		c.finWanted = true
		c.sendCtrlLocked()
		end := time.Now().Add(closeWait)
		for c.inflight > 0 && c.err == nil && time.Now().Before(end) {
			c.mu.Unlock()
			time.Sleep(100 * time.Microsecond)
			c.mu.Lock()
			c.progressLocked()
		}
		c.closed = true
		c.kickLocked()
		c.mu.Unlock()
		close(c.done)
		select {
		case <-c.reactDone:
		case <-time.After(closeWait): // no kick: rdmacm's Close ends its wait
		}
		c.closeErr = c.rc.Close()
		<-c.reactDone
		c.release()
		c.releaseOneSided()
	})
	if !first {
		return c.opErr("close", net.ErrClosed)
	}
	if c.closeErr != nil {
		return c.opErr("close", c.closeErr)
	}
	return nil
}

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the time after which a Read or ReadAt, waiting
// or not, fails with an error wrapping os.ErrDeadlineExceeded (Timeout()
// is true); the zero time clears it. ReadAt takes the read deadline
// because, like Read, it brings the peer's bytes here.
func (c *Conn) SetReadDeadline(t time.Time) error {
	return c.setDeadline(&c.rdl, c.readReady, &c.rexp, t)
}

// SetWriteDeadline is SetReadDeadline for Writes, and WriteAt.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	return c.setDeadline(&c.wdl, c.writeReady, &c.wexp, t)
}

func (c *Conn) setDeadline(dl *atomic.Int64, ready chan struct{}, exp *expiry, t time.Time) error {
	select {
	case <-c.done:
		return c.opErr("set deadline", net.ErrClosed)
	default:
	}
	var d int64
	if !t.IsZero() {
		d = t.UnixNano()
		if d == 0 {
			d = 1 // 0 means none
		}
	}
	dl.Store(d)
	exp.set(d) // the waiting ReadAts or WriteAts look at the new deadline
	select {   // the waiting Read or Write does too
	case ready <- struct{}{}:
	default:
	}
	return nil
}

// opErr wraps err as net does.
func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: network, Source: c.laddr, Addr: c.raddr, Err: err}
}

// expired reports whether the deadline dl has passed.
func expired(dl *atomic.Int64) bool {
	d := dl.Load()
	return d != 0 && time.Now().UnixNano() >= d
}

var _ interface {
	net.Conn
	CloseWrite() error
} = (*Conn)(nil)
