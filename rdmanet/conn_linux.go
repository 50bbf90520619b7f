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
// rest a data message's write-buffer slots, or the one-sided operation's
// slot.
const (
	tagOp   = 0 << 62 // a one-sided RDMA READ or WRITE in slot i (region_linux.go)
	tagRecv = 1 << 62 // a receive: it carries no memory
	tagSend = 2 << 62 // a data message from i slots of the write buffers
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
	rc  *rdmacm.Conn
	qp  *uverbs.QP
	cq  *cq.CQ
	ch  *cq.Channel
	buf *uverbs.Buffer
	// mem is the read ring, ReadBuffers slots the peer writes into (rmr,
	// remote write), then the write buffers, WriteBuffers slots this
	// side's messages go from (wmr); rbase and wbase are their addresses
	// as the device sees them.
	mem          []byte
	rmr, wmr     *uverbs.MR
	rbase, wbase uint64
	cfg          Config
	laddr        Addr
	raddr        Addr

	readMu  sync.Mutex // serialises Reads
	writeMu sync.Mutex // serialises Writes

	// mu guards what follows, and the QP's posts.
	mu sync.Mutex
	// The read side: the messages in the ring not yet read, in arrival
	// order, as a ring over ready; the first of them read up to readOff.
	// The next message lands at slot recvPos; ringUsed slots hold data.
	ready             []readyBuf
	readyHead, readyN int
	readOff           int
	recvPos, ringUsed int
	eof               bool   // the peer's fin arrived
	owed              uint16 // slots freed and not yet handed back to the peer
	creditAt          uint16 // owed this high, a credit message goes unless data carries it
	rwr               [1]uverbs.RecvWR
	// The write side: the peer's ring (peer), the credits ours to spend
	// in it, and the slot our next message goes to; the write buffers as
	// a ring too, sendUsed slots in flight before sendPos.
	peer                 hello
	credits, peerCredits int // the peer's slots ours to take, and how many its ring has
	peerPos              int
	sendPos, sendUsed    int
	inflight, sqDepth    int  // messages posted and not completed, and the most there may be
	finWanted, finSent   bool // CloseWrite or Close asked for a fin; it went
	err                  error
	// closing is set as Close begins: from then on every call, and every
	// one waiting, ends with net.ErrClosed, though the fin and the
	// messages in flight still go. closed is set once they have gone (or
	// a second passed) and the connection is torn down.
	closing, closed bool
	wcs             [16]cq.WC
	swr             [1]uverbs.SendWR
	ssge            [1]uverbs.SGE

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
	releaseOnce sync.Once
	closeErr    error

	// One-sided operations (region_linux.go). ops and opFree are made
	// once, so that an operation allocates nothing; a slot's state, the
	// regions and the bounce memory are guarded by mu.
	ops      []opSlot
	opFree   chan int // the slots not in use
	regions  []*Region
	bounceMu sync.Mutex // serialises the bounce memory's allocation
	// regMu is held for reading by whatever registers or deregisters on
	// the connection's PD (Register, allocBounce, Region.Close), and by
	// Close for writing while it tears the connection down: no MR comes
	// or goes under the PD's deallocation.
	regMu      sync.RWMutex
	bounce     bounceMem
	rexp, wexp expiry // the deadlines again, as channels many waiters select on
}

// readyBuf is a message in the read ring: n bytes from slot, taking
// slots slots.
type readyBuf struct{ slot, n, slots int }

// newConn gives rc, a connection in the making, its registered ring and
// buffers, posts its receives and writes the ring's place into pd, the
// hello that goes to the peer: called by rdmacm before the connection is
// made (Config.Setup), so that the peer's first message finds a receive.
func newConn(rc *rdmacm.Conn, cfg Config, pd []byte) (*Conn, error) {
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
	if c.rmr, err = rc.PD().RegMR(c.mem[:r*bs], uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite); err != nil {
		c.buf.Close()
		return nil, err
	}
	if c.wmr, err = rc.PD().RegMR(c.mem[r*bs:], uverbs.AccessLocalWrite); err != nil {
		c.rmr.Close()
		c.buf.Close()
		return nil, err
	}
	c.rbase, c.wbase = c.rmr.Addr(), c.wmr.Addr()
	c.ready = make([]readyBuf, r)
	c.rwr[0] = uverbs.RecvWR{WRID: tagRecv}
	for range r {
		if _, err := c.qp.PostRecv(c.rwr[:]); err != nil {
			c.release()
			return nil, err
		}
	}
	hello{credits: uint16(r), bufSize: uint32(bs), rkey: c.rmr.RKey(), ringAddr: c.rbase}.put(pd)
	c.creditAt = uint16(max(1, r/2))
	c.swr[0].SGL = c.ssge[:]
	c.rtimer, c.wtimer = time.NewTimer(time.Hour), time.NewTimer(time.Hour)
	c.rtimer.Stop()
	c.wtimer.Stop()
	return c, nil
}

// start begins the stream once the peer's hello is known.
func (c *Conn) start(peer hello) {
	c.peer = peer
	c.credits, c.peerCredits = int(peer.credits), int(peer.credits)
	go c.react()
}

// releaseAll gives back everything registered on the connection's PD,
// as rdmacm's Release: the buffers, the Regions and the bounce memory. c
// may be nil (Setup failed before making it); a second call does
// nothing.
func (c *Conn) releaseAll() {
	if c == nil {
		return
	}
	c.releaseOnce.Do(func() {
		c.release()
		c.releaseOneSided()
	})
}

// release gives back the buffers; the connection is closed.
func (c *Conn) release() {
	c.wmr.Close()
	c.rmr.Close()
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
		// time it parks. Close wakes it by closing the channel.
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
		c.sendUsed -= i
		c.inflight--
		if wc.Status == cq.RemAccessErr {
			// Data goes only inside the ring the peer advertised: a
			// refusal means the ring went with the peer's process.
			c.failLocked(lostErr(wc.Status))
			return
		}
	case tagCtrl:
		c.inflight--
	case tagRecv:
		if wc.Status == cq.Success {
			c.receivedLocked(wc)
			return
		}
	}
	if wc.Status != cq.Success {
		c.failLocked(statusErr(wc.Status))
	}
}

// receivedLocked takes the message whose receive completed, and posts
// the receive again.
func (c *Conn) receivedLocked(wc *cq.WC) {
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
		c.failLocked(fmt.Errorf("%w: %d credits handed back, %d slots in its ring", errProtocol, c.credits, c.peerCredits))
		return
	}
	bs, k, n := c.cfg.BufferSize, int(h.slots), int(wc.ByteLen)
	switch {
	case h.kind == kindData && wc.Opcode == cq.OpRecvRDMAWithImm && n > (k-1)*bs && n <= k*bs &&
		c.recvPos+k <= len(c.ready) && c.ringUsed+k <= len(c.ready) && !c.eof:
		c.ready[(c.readyHead+c.readyN)%len(c.ready)] = readyBuf{c.recvPos, n, k}
		c.readyN++
		c.recvPos = (c.recvPos + k) % len(c.ready)
		c.ringUsed += k
	case h.kind != kindData && wc.Opcode == cq.OpRecv && n == 0:
		c.eof = c.eof || h.kind == kindFin
		c.owed++
	default:
		c.failLocked(fmt.Errorf("%w: a message of kind %d (%v) with %d bytes in %d slots, at slot %d of %d, %d in use (after fin: %t)",
			errProtocol, h.kind, wc.Opcode, n, k, c.recvPos, len(c.ready), c.ringUsed, c.eof))
		return
	}
	if _, err := c.qp.PostRecv(c.rwr[:]); err != nil {
		c.failLocked(err)
	}
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
		return lostErr(s)
	case cq.RemAccessErr:
		return fmt.Errorf("%w (completion %v)", ErrRemoteAccess, s)
	}
	return fmt.Errorf("completion %v: %w", s, unix.EIO)
}

// lostErr is the error of a connection whose peer went away, as the
// completion of status s tells it.
func lostErr(s cq.Status) error {
	return fmt.Errorf("connection lost (completion %v): %w", s, unix.ECONNRESET)
}

// failLocked records the connection's first error.
func (c *Conn) failLocked(err error) {
	if c.err == nil {
		c.err = err
	}
}

// postLocked posts one message: kind, with the credits owed, and for
// data n bytes at sendPos in the write buffers, which take slots of them
// there and peerSlots slots of the peer's ring at peerPos.
func (c *Conn) postLocked(kind uint8, n, slots, peerSlots int) error {
	wr := &c.swr[0]
	wr.Flags = uverbs.SendSignaled
	wr.Imm = header{kind: kind, slots: uint16(peerSlots), credits: c.owed}.imm()
	if kind != kindData {
		wr.Opcode, wr.WRID, wr.SGL = uverbs.WRSendWithImm, tagCtrl, nil
	} else {
		wr.Opcode, wr.WRID, wr.SGL = uverbs.WRRDMAWriteWithImm, tagSend|uint64(slots), c.ssge[:]
		wr.RemoteAddr = c.peer.ringAddr + uint64(c.peerPos)*uint64(c.peer.bufSize)
		wr.RKey = c.peer.rkey
		c.ssge[0] = uverbs.SGE{Addr: c.wbase + uint64(c.sendPos*c.cfg.BufferSize), Length: uint32(n), LKey: c.wmr.LKey()}
	}
	if _, err := c.qp.PostSend(c.swr[:]); err != nil {
		c.failLocked(err)
		return err
	}
	if kind == kindData {
		c.credits -= peerSlots
		c.peerPos = (c.peerPos + peerSlots) % c.peerCredits
		c.sendPos = (c.sendPos + slots) % c.cfg.WriteBuffers
		c.sendUsed += slots
	} else {
		c.credits--
	}
	c.owed = 0
	c.inflight++
	return nil
}

// nextMsgLocked sizes the next data message of a Write with rest bytes
// left: n bytes, in slots contiguous slots of the write buffers and
// peerSlots contiguous slots of the peer's ring, the next of each. A
// message takes at most half of either side's, so that one is written
// while the last is read. n is 0 while there is no room.
func (c *Conn) nextMsgLocked(rest int) (n, slots, peerSlots int) {
	w, pbs := c.cfg.WriteBuffers, int(c.peer.bufSize)
	if c.sendUsed == 0 {
		c.sendPos = 0 // all of them in one piece
	}
	local := min(w-c.sendPos, w-c.sendUsed, max(1, w/2))
	remote := min(c.peerCredits-c.peerPos, c.credits-1, max(1, c.peerCredits/2), maxMsgSlots) // one credit stays for control
	if local <= 0 || remote <= 0 {
		return 0, 0, 0
	}
	n = min(rest, local*c.cfg.BufferSize, remote*pbs)
	return n, (n + c.cfg.BufferSize - 1) / c.cfg.BufferSize, (n + pbs - 1) / pbs
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
		if c.postLocked(kindFin, 0, 0, 0) == nil {
			c.finSent = true
		}
	case c.owed >= c.creditAt:
		c.postLocked(kindCredit, 0, 0, 0)
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
		case c.closing:
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

// copyOutLocked copies the ready data into b, freeing the ring's slots
// of each message it empties: credits owed to the peer.
func (c *Conn) copyOutLocked(b []byte) int {
	n := 0
	for c.readyN > 0 && n < len(b) {
		r := c.ready[c.readyHead]
		off := r.slot * c.cfg.BufferSize
		k := copy(b[n:], c.mem[off+c.readOff:off+r.n])
		n += k
		if c.readOff += k; c.readOff < r.n {
			break
		}
		c.readOff = 0
		c.readyHead = (c.readyHead + 1) % len(c.ready)
		c.readyN--
		c.ringUsed -= r.slots
		c.owed += uint16(r.slots)
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
		case c.closing:
			return n, c.opErr("write", net.ErrClosed)
		case expired(&c.wdl):
			return n, c.opErr("write", os.ErrDeadlineExceeded)
		case c.finWanted:
			return n, c.opErr("write", fmt.Errorf("write after CloseWrite: %w", unix.EPIPE))
		case c.err != nil:
			return n, c.opErr("write", c.err)
		case n == len(b):
			return n, nil
		case c.inflight < c.sqDepth:
			k, slots, peerSlots := c.nextMsgLocked(len(b) - n)
			if k == 0 {
				break
			}
			off := (c.cfg.ReadBuffers + c.sendPos) * c.cfg.BufferSize
			copy(c.mem[off:off+k], b[n:])
			if err := c.postLocked(kindData, k, slots, peerSlots); err != nil {
				return n, c.opErr("write", err)
			}
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
			if c.progressLocked() || c.closing {
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
	case c.closing:
		return c.opErr("close", net.ErrClosed)
	case c.err != nil:
		return c.opErr("close", c.err)
	}
	c.finWanted = true
	c.sendCtrlLocked()
	return nil
}

// Close sends a fin, waits up to a second for the messages in flight,
// then disconnects and gives back the connection's memory. From the
// moment it begins, every call on the Conn (Read, Write, ReadAt,
// WriteAt, Register, CloseWrite), waiting or new, ends with an error
// wrapping net.ErrClosed; a one-sided operation already posted may still
// complete. A second Close returns an error wrapping net.ErrClosed.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.mu.Lock()
		c.closing = true
		c.finWanted = true
		c.sendCtrlLocked()
		c.wake() // the Read and Write waiting end now, with net.ErrClosed
		end := time.Now().Add(closeWait)
		for c.inflight > 0 && c.err == nil && time.Now().Before(end) {
			c.mu.Unlock()
			time.Sleep(100 * time.Microsecond)
			c.mu.Lock()
			c.progressLocked()
		}
		c.closed = true
		c.mu.Unlock()
		close(c.done)
		// Closing the completion channel ends the event goroutine's Wait,
		// parked or about to park, before the CQ goes with the connection.
		_ = c.ch.Close()
		<-c.reactDone
		c.regMu.Lock()
		c.closeErr = c.rc.Close() // its Release calls releaseAll
		c.releaseAll()            // (a no-op then)
		c.regMu.Unlock()
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
