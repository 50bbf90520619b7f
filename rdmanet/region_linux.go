package rdmanet

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

// One-sided operations: Register, ReadAt and WriteAt.
//
// A ReadAt or WriteAt takes a slot (one of opSlots, each owning a send
// work request and a wake-up channel made with the Conn), posts one
// signalled RDMA READ or WRITE whose ID is the slot's index under tagOp,
// and waits for its completion, which completeLocked hands to the slot.
// Nothing on the wire changes: the stream's protocol does not know about
// these operations, and tokens travel in the application's own bytes.

const (
	// opSlots is how many one-sided operations a Conn has in flight at
	// most, its share of the send queue beside the stream's
	// (cmConfig). More callers wait for a slot. Sixteen keeps a link busy
	// with small operations while adding only 16 requests to each QP, and
	// 16 × BufferSize of bounce memory to a Conn that bounces.
	opSlots = 16

	// maxOpLen is the most bytes one RDMA READ or WRITE moves: 1 GiB,
	// what every device takes in one message (mlx5's limit; rxe's is
	// 2 GiB). A longer ReadAt or WriteAt is a sequence of operations.
	maxOpLen = 1 << 30

	// regionAccess is what a Region grants: the peer reads and writes it
	// (remote write needs local write too). One kind of Region keeps the
	// API small; an application that must not let its peer write keeps
	// such memory out of regions and bounces it, or trusts its peer.
	regionAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite
)

// opSlot is one one-sided operation's state. wr, sge and done belong to
// the goroutine holding the slot (taken from Conn.opFree); the rest is
// guarded by Conn.mu.
type opSlot struct {
	wr   [1]uverbs.SendWR
	sge  [1]uverbs.SGE
	done chan struct{} // capacity 1: the completion arrived

	posted    bool      // a request of this slot is in the send queue
	waiting   bool      // its caller waits for it; false: abandoned, completeLocked retires it
	completed bool      // its completion arrived, with status
	status    cq.Status // the completion's
	region    *Region   // the local Region its memory is in, if not bounce memory
}

// bounceMem is the registered memory a ReadAt or WriteAt copies through
// when the caller's bytes are not in a Region of the Conn: BufferSize
// bytes for each slot, allocated on the first such call.
type bounceMem struct {
	buf  *uverbs.Buffer
	mr   *uverbs.MR
	mem  []byte
	size int // bytes per slot
}

// initOps makes the slots, so that no operation allocates.
func (c *Conn) initOps() {
	c.ops = make([]opSlot, opSlots)
	c.opFree = make(chan int, opSlots)
	for i := range c.ops {
		s := &c.ops[i]
		s.done = make(chan struct{}, 1)
		s.wr[0].WRID = tagOp | uint64(i)
		s.wr[0].Flags = uverbs.SendSignaled
		s.wr[0].SGL = s.sge[:]
		c.opFree <- i
	}
	c.rexp.init()
	c.wexp.init()
}

// Region is memory of this side that the peer may read and write with
// RDMA, named by its Token: a memory registration over the bytes given
// to Conn.Register, granting remote read and write. A ReadAt's or
// WriteAt's local bytes inside a Region of the same Conn move with no
// copy. Its methods are safe for concurrent use.
//
// The peer's device reads and writes the bytes at any time, behind the
// Go runtime's back: the application agrees with its peer, over the
// stream or otherwise, on when either side may touch which bytes.
type Region struct {
	c   *Conn
	mr  *uverbs.MR
	mem []byte
	tok Token

	// Guarded by c.mu.
	closing  bool          // Close began (or the Conn's Close deregistered it): no new operation uses it
	users    int           // operations in flight in its memory
	idle     chan struct{} // made by a Close waiting for users; closed when they are done
	released bool          // the Conn's Close deregistered it
}

// Register registers b for RDMA on the connection's device and returns
// the Region the peer may read and write through its Token. b follows
// docs/MEMORY.md's rules: memory of uverbs.AllocBuffer (pages outside
// the Go heap, safe across fork) or a Go-heap slice, which the Region
// keeps alive; never memory whose address may move, such as the stack.
// Close the Region when the peer is done with it; the Conn's Close
// closes those still open.
//
// The connection's QP lives in the protection domain rdmacm shares
// among this process's connections on the device, so a Token is a
// capability: any of those connections' peers holding it may use it.
// Give tokens to trusted peers only.
func (c *Conn) Register(b []byte) (*Region, error) {
	if len(b) == 0 {
		return nil, c.opErr("register", fmt.Errorf("rdmanet: a region of no bytes: %w", unix.EINVAL))
	}
	c.regMu.RLock()
	defer c.regMu.RUnlock()
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return nil, c.opErr("register", net.ErrClosed)
	}
	mr, err := c.rc.PD().RegMR(b, regionAccess)
	if err != nil {
		return nil, c.opErr("register", err)
	}
	r := &Region{c: c, mr: mr, mem: b, tok: Token{Addr: mr.Addr(), Len: uint64(len(b)), RKey: mr.RKey()}}
	c.mu.Lock()
	if c.closed { // Close has taken the list of regions it deregisters
		c.mu.Unlock()
		mr.Close()
		return nil, c.opErr("register", net.ErrClosed)
	}
	c.regions = append(c.regions, r)
	c.mu.Unlock()
	return r, nil
}

// Token returns what the peer passes to ReadAt and WriteAt to reach the
// region. It stays the same for the Region's life.
func (r *Region) Token() Token { return r.tok }

// Bytes returns the region's memory: the slice given to Register.
func (r *Region) Bytes() []byte { return r.mem }

// Close deregisters the region: the peer's operations with its token
// fail from then on. On a reliable connection such an operation is a
// remote access error, which breaks the peer's QP and this side's (the
// peer's ReadAt or WriteAt returns an error wrapping ErrRemoteAccess,
// and both sides' later calls fail): withdraw a token from the peer
// before closing its region. Close first waits for this side's own
// ReadAts and WriteAts whose bytes are in the region: deregistering
// memory under one would break the connection too. After the Conn's
// Close, which deregisters every Region, and on a second Close, it
// returns an error wrapping net.ErrClosed.
func (r *Region) Close() error {
	c := r.c
	c.mu.Lock()
	if r.closing {
		c.mu.Unlock()
		return c.opErr("close region", net.ErrClosed)
	}
	r.closing = true
	if r.users > 0 {
		// An operation in flight (or abandoned by a deadline) completes,
		// is flushed, or ends with the Conn's Close, which wakes this.
		idle := make(chan struct{})
		r.idle = idle
		c.mu.Unlock()
		<-idle
	} else {
		c.mu.Unlock()
	}
	// Not while the Conn's Close tears down, which deregisters it then.
	c.regMu.RLock()
	defer c.regMu.RUnlock()
	c.mu.Lock()
	if r.released {
		c.mu.Unlock()
		return c.opErr("close region", net.ErrClosed)
	}
	for i, x := range c.regions {
		if x == r {
			c.regions = append(c.regions[:i], c.regions[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	if err := r.mr.Close(); err != nil {
		return c.opErr("close region", err)
	}
	return nil
}

// ReadAt reads len(dst) bytes at offset off of the peer's region named
// by t into dst with RDMA READ, and returns when they are in dst. It
// reads all of them or fails: a range outside the token (off < 0 or off
// + len(dst) > t.Len) is an error wrapping unix.EINVAL, returned before
// anything is sent, unlike io.ReaderAt's short reads: the length of a
// remote region is no end of data but a bound the application chose, so
// crossing it is a bug to report, not a place to stop.
//
// dst inside a Region of this Conn is read into with no copy; other
// memory (the Go heap, the stack) is read through registered bounce
// memory, Config.BufferSize bytes an operation. The read deadline
// (SetReadDeadline) bounds it; a ReadAt waiting ends with net.ErrClosed
// on Close. A ReadAt that ends so, before its operation completed,
// leaves that operation to the device: bytes of dst in a Region may
// still change until it completes (the Region's Close waits for it). A
// token the peer does not grant (its region closed, or never one of
// its) gives an error wrapping ErrRemoteAccess and breaks the
// connection. n is how many bytes are in dst: len(dst), or on an error
// those of the operations that completed before it (a ReadAt bigger
// than one operation moves in several).
//
// Many ReadAts and WriteAts may run at once, from any goroutines, beside
// the stream's Read and Write; with 16 in flight, more wait their turn.
// Once running, one allocates nothing.
func (c *Conn) ReadAt(t Token, off int64, dst []byte) (n int, err error) {
	return c.oneSided(false, t, off, dst)
}

// WriteAt writes src at offset off of the peer's region named by t with
// RDMA WRITE, and returns when the peer's device has acknowledged every
// byte (the write's completion). It
// is ReadAt's twin: the same bounds, bounce memory outside a Region,
// concurrency and errors; the write deadline (SetWriteDeadline) bounds
// it. A WriteAt that ends before its operation completed (a deadline,
// Close) leaves the remote bytes undefined, and those of src in a
// Region may still be read until it completes. The peer's application
// learns of the write only from the application: by a message on the
// stream after WriteAt returns, for instance, which arrives after the
// written bytes are in place.
func (c *Conn) WriteAt(t Token, off int64, src []byte) (n int, err error) {
	return c.oneSided(true, t, off, src)
}

// oneSided is ReadAt (write false) and WriteAt.
func (c *Conn) oneSided(write bool, t Token, off int64, p []byte) (int, error) {
	op, dl, exp := "readat", &c.rdl, &c.rexp
	if write {
		op, dl, exp = "writeat", &c.wdl, &c.wexp
	}
	// Bounds are checked here, before anything is posted: the peer's
	// device would refuse the range too, but with a remote access error,
	// which breaks the connection.
	switch {
	case !t.valid():
		return 0, c.opErr(op, fmt.Errorf("rdmanet: token %v wraps past the end of the address space: %w", t, unix.EINVAL))
	case off < 0 || uint64(off) > t.Len || uint64(len(p)) > t.Len-uint64(off):
		return 0, c.opErr(op, fmt.Errorf("rdmanet: %d bytes at offset %d of a region of %d bytes (token %v): %w", len(p), off, t.Len, t, unix.EINVAL))
	}
	if len(p) == 0 { // nothing to move; the Conn's state still shows
		c.mu.Lock()
		err := c.opUsableLocked(dl)
		c.mu.Unlock()
		if err != nil {
			return 0, c.opErr(op, err)
		}
		return 0, nil
	}
	n := 0
	for n < len(p) {
		k, err := c.transfer(write, t.Addr+uint64(off)+uint64(n), t.RKey, p[n:], dl, exp)
		n += k
		if err != nil {
			return n, c.opErr(op, err)
		}
	}
	return n, nil
}

// opUsableLocked is why a one-sided operation may not start now, or nil.
// A broken connection takes none: its QP flushes them, or worse.
func (c *Conn) opUsableLocked(dl *atomic.Int64) error {
	switch {
	case c.closing:
		return net.ErrClosed
	case c.err != nil:
		return c.err
	case expired(dl):
		return os.ErrDeadlineExceeded
	}
	return nil
}

// transfer moves the first bytes of p (a Region's worth, up to maxOpLen,
// or a bounce slot's) from or to the peer's raddr with one operation,
// and returns how many it moved.
func (c *Conn) transfer(write bool, raddr uint64, rkey uint32, p []byte, dl *atomic.Int64, exp *expiry) (int, error) {
	i, err := c.takeSlot(dl, exp)
	if err != nil {
		return 0, err
	}
	s := &c.ops[i]
	n := min(len(p), maxOpLen)
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p))))
	c.mu.Lock()
	var bounceOff int // where in the bounce memory, when bounced
	for {
		if err := c.opUsableLocked(dl); err != nil {
			c.mu.Unlock()
			c.opFree <- i
			return 0, err
		}
		if r := c.regionLocked(addr, n); r != nil {
			r.users++
			s.region = r
			s.sge[0] = uverbs.SGE{Addr: addr, Length: uint32(n), LKey: r.mr.LKey()}
			break
		}
		if c.bounce.mr == nil {
			c.mu.Unlock()
			err := c.allocBounce()
			c.mu.Lock()
			if err != nil {
				c.mu.Unlock()
				c.opFree <- i
				return 0, err
			}
			continue // the state may have changed meanwhile
		}
		n = min(n, c.bounce.size)
		bounceOff = i * c.bounce.size
		if write { // under mu: Close unmaps the bounce memory once it is closed
			copy(c.bounce.mem[bounceOff:bounceOff+n], p[:n])
		}
		s.sge[0] = uverbs.SGE{Addr: c.bounce.mr.Addr() + uint64(bounceOff), Length: uint32(n), LKey: c.bounce.mr.LKey()}
		break
	}
	wr := &s.wr[0]
	wr.Opcode = uverbs.WRRDMARead
	if write {
		wr.Opcode = uverbs.WRRDMAWrite
	}
	wr.RemoteAddr, wr.RKey = raddr, rkey
	s.posted, s.waiting, s.completed = true, true, false
	// Posting under mu keeps the slot's state and the QP's queue in step;
	// the stream posts under it too.
	if k, err := c.qp.PostSend(s.wr[:]); k == 0 && err != nil {
		// Nothing was posted (with k == 1 and an error, the doorbell
		// failed after the request was written: it is in the queue and
		// completes, so the wait below goes on).
		c.retireLocked(i)
		c.mu.Unlock()
		return 0, err
	}
	return c.awaitLocked(i, write, p[:n], bounceOff, dl, exp)
}

// awaitLocked waits, without mu while it sleeps, for slot i's completion
// and returns with mu unlocked: len(p) and nil, or the operation's
// error. A deadline, Close or the end of the CQ's waiting ends it
// earlier: the slot is then abandoned to completeLocked (or Close).
func (c *Conn) awaitLocked(i int, write bool, p []byte, bounceOff int, dl *atomic.Int64, exp *expiry) (int, error) {
	s := &c.ops[i]
	for {
		if !s.completed {
			c.progressLocked() // the completion may be in the CQ already
		}
		if s.completed {
			// Done, even if Close began meanwhile: what remains is a copy
			// out of bounce memory, which Close unmaps only after taking
			// mu and seeing it still here.
			status := s.status
			if status == cq.Success && !write && s.region == nil {
				if c.bounce.mem == nil {
					status = cq.WRFlushErr
				} else {
					copy(p, c.bounce.mem[bounceOff:bounceOff+len(p)])
				}
			}
			closed := c.closed
			c.retireLocked(i)
			c.mu.Unlock()
			switch {
			case status != cq.Success && closed: // flushed by Close's own error state
				return 0, net.ErrClosed
			case status != cq.Success:
				return 0, statusErr(status)
			}
			return len(p), nil
		}
		var err error
		switch {
		case c.closed:
			err = net.ErrClosed
		case expired(dl):
			err = os.ErrDeadlineExceeded
		}
		if err == nil && chanClosed(c.reactDone) {
			// Nobody else polls the CQ: it broke (c.err says how).
			if err = c.err; err == nil {
				err = net.ErrClosed
			}
		}
		if err != nil {
			s.waiting = false
			c.mu.Unlock()
			return 0, err
		}
		if c.cfg.BusyPoll > 0 {
			c.busyPollLocked(s)
			if s.completed || c.closed {
				continue
			}
		}
		c.parkLocked()
		c.mu.Unlock()
		select {
		case <-s.done:
		case <-exp.wait():
		case <-c.done:
		case <-c.reactDone:
		}
		c.mu.Lock()
		c.unparkLocked()
	}
}

// busyPollLocked polls the CQ for up to Config.BusyPoll, until slot s
// completes or the Conn closes.
func (c *Conn) busyPollLocked(s *opSlot) {
	for end := time.Now().Add(c.cfg.BusyPoll); time.Now().Before(end); {
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
		c.progressLocked()
		if s.completed || c.closed {
			return
		}
	}
}

// takeSlot takes a free slot, waiting while every one is in flight.
func (c *Conn) takeSlot(dl *atomic.Int64, exp *expiry) (int, error) {
	select {
	case i := <-c.opFree:
		return i, nil
	default:
	}
	// A slot comes free as a completion is polled: someone must.
	c.mu.Lock()
	c.parkLocked()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.unparkLocked()
		c.mu.Unlock()
	}()
	for {
		if expired(dl) {
			return 0, os.ErrDeadlineExceeded
		}
		select {
		case i := <-c.opFree:
			return i, nil
		case <-exp.wait(): // passed, or moved: look again
		case <-c.done:
			return 0, net.ErrClosed
		}
	}
}

// opCompleteLocked takes the completion of slot i's operation. A failed
// one fails the connection: its QP is in the error state (a remote access
// error breaks both sides'), or was already.
func (c *Conn) opCompleteLocked(i int, status cq.Status) {
	if i >= len(c.ops) || !c.ops[i].posted {
		c.failLocked(fmt.Errorf("rdmanet: a completion of one-sided slot %d, which has nothing posted: %w", i, unix.EIO))
		return
	}
	s := &c.ops[i]
	if status != cq.Success {
		c.failLocked(statusErr(status))
	}
	if !s.waiting {
		c.retireLocked(i)
		return
	}
	s.status, s.completed = status, true
	select {
	case s.done <- struct{}{}:
	default:
	}
}

// retireLocked frees slot i, whose operation is over (or was never
// posted): its Region has one user fewer, and another caller may take
// the slot.
func (c *Conn) retireLocked(i int) {
	s := &c.ops[i]
	if r := s.region; r != nil {
		s.region = nil
		if r.users--; r.users == 0 && r.idle != nil {
			close(r.idle)
			r.idle = nil
		}
	}
	s.posted, s.waiting, s.completed = false, false, false
	select { // a wake-up that came after its caller stopped looking
	case <-s.done:
	default:
	}
	c.opFree <- i // never blocks: the channel holds every slot
}

// regionLocked returns the open Region of the Conn holding the n bytes at
// addr, or nil. It looks at each: a Conn has few regions, and a list
// allows overlapping ones (the same memory registered twice).
func (c *Conn) regionLocked(addr uint64, n int) *Region {
	for _, r := range c.regions {
		if !r.closing && addr >= r.tok.Addr && addr-r.tok.Addr <= r.tok.Len && uint64(n) <= r.tok.Len-(addr-r.tok.Addr) {
			return r
		}
	}
	return nil
}

// allocBounce allocates and registers the bounce memory, once: many a
// Conn never bounces, so it does not pay for it until then.
func (c *Conn) allocBounce() error {
	c.bounceMu.Lock()
	defer c.bounceMu.Unlock()
	c.regMu.RLock()
	defer c.regMu.RUnlock()
	c.mu.Lock()
	done, closing := c.bounce.mr != nil, c.closing
	c.mu.Unlock()
	switch {
	case done:
		return nil
	case closing:
		return net.ErrClosed
	}
	size := c.cfg.BufferSize
	buf, err := uverbs.AllocBuffer(opSlots * size)
	if err != nil {
		return err
	}
	mr, err := c.rc.PD().RegMR(buf.Bytes(), uverbs.AccessLocalWrite)
	if err != nil {
		buf.Close()
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed { // Close has released what it saw
		mr.Close()
		buf.Close()
		return net.ErrClosed
	}
	c.bounce = bounceMem{buf: buf, mr: mr, mem: buf.Bytes(), size: size}
	return nil
}

// releaseOneSided deregisters the regions still listed and the bounce
// memory: Close calls it once the QP is destroyed, so no operation is in
// flight, and before the connection's PD goes, so it deregisters them
// all itself: a Region's Close under way (waiting for its users, or for
// Close's end) returns net.ErrClosed.
func (c *Conn) releaseOneSided() {
	c.mu.Lock()
	own := c.regions
	for _, r := range own {
		if r.idle != nil {
			close(r.idle)
			r.idle = nil
		}
		r.closing, r.released = true, true
	}
	c.regions = nil
	b := c.bounce
	c.bounce = bounceMem{}
	c.mu.Unlock()
	for _, r := range own {
		r.mr.Close()
	}
	if b.mr != nil {
		b.mr.Close()
		b.buf.Close()
	}
	c.rexp.stop()
	c.wexp.stop()
}

// chanClosed reports whether ch is closed (ch is never sent on).
func chanClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// expiry is a deadline as a channel closed when it passes: what the many
// ReadAts or WriteAts waiting select on, where the stream's one Read or
// Write has its own timer. It allocates only when the deadline is set
// (its timer, once; a new channel after one passed), never per wait.
type expiry struct {
	mu    sync.Mutex
	at    int64         // UnixNano; 0: none
	ch    chan struct{} // closed once at passes
	fired bool          // ch is closed
	t     *time.Timer
}

func (e *expiry) init() { e.ch = make(chan struct{}) }

// wait returns the channel closed when the deadline passes. A waiter woken
// looks at the deadline again: it may have moved.
func (e *expiry) wait() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ch
}

// set moves the deadline to at (UnixNano; 0: none).
func (e *expiry) set(at int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.at = at
	if e.fired {
		e.ch, e.fired = make(chan struct{}), false
	}
	if e.t != nil {
		e.t.Stop()
	}
	if at != 0 {
		e.armLocked()
	}
}

// armLocked closes the channel if the deadline has passed, else sets the
// timer for it.
func (e *expiry) armLocked() {
	left := time.Until(time.Unix(0, e.at))
	switch {
	case left <= 0:
		close(e.ch)
		e.fired = true
	case e.t == nil:
		e.t = time.AfterFunc(left, e.fire)
	default:
		e.t.Reset(left)
	}
}

// fire is the timer's: a timer of a deadline since moved, or one that
// fires early by the wall clock, rearms instead.
func (e *expiry) fire() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.at != 0 && !e.fired {
		e.armLocked()
	}
}

// stop stops the timer: the Conn is closed.
func (e *expiry) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.t != nil {
		e.t.Stop()
	}
}
