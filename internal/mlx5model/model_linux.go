package mlx5model

import (
	"cmp"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Options choose how the model behaves; the zero value is a Linux 6.1
// kernel with a ConnectX-6 Dx, as rdma-core meets it.
type Options struct {
	// StaticUAR acts as a kernel older than 5.8: no dynamic UARs. The
	// MLX5_LIB_CAP_DYN_UAR bit of GET_CONTEXT is ignored (old kernels
	// did not know it), the context gets as many static blue-flame
	// registers as it asks for, the UAR driver object does not exist, and
	// the kernel picks each QP's register (mlx5_ib_create_qp_resp).
	StaticUAR bool
	// RefuseDynUAR, with StaticUAR, refuses GET_CONTEXT with EINVAL when
	// it asks for dynamic UARs, instead of ignoring the bit.
	RefuseDynUAR bool
	// CQEVersion0 answers cqe_version 0 whatever the library asks: QPs
	// then carry user index 0xffffff and CQEs name their QP by QPN.
	CQEVersion0 bool
	// CompVectors is the number of completion vectors (default 2).
	CompVectors int
	// ArmFiresOnPending makes an arm whose consumer index lags the
	// producer fire at once, as the device's arm semantics may; by
	// default only a CQE written after the arm fires it.
	ArmFiresOnPending bool
	// RealTimeClock runs the device's clock in real-time mode, as a
	// ConnectX-6 Dx and later can: GET_CONTEXT reports REAL_TIME_TS, and
	// a CQ created with MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS gets the time
	// of day in its CQEs' timestamps. Without it the clock is
	// free-running and the flag is refused.
	RealTimeClock bool
}

// timestampMask is the bits of the device's free-running clock that
// count (ibv_device_attr_ex.completion_timestamp_mask).
const timestampMask = 1<<63 - 1

// Stats counts what the HCA did.
type Stats struct {
	SendDoorbells uint64 // send doorbells rung on a UAR
	ArmDoorbells  uint64 // CQ arm doorbells rung on a UAR
	Arms          uint64 // arms taken (doorbells, or arm words seen changed in a doorbell record)
	StaleArms     uint64 // arms ignored: their sequence number was old
	Events        uint64 // completion events fired
	WQEs          uint64 // send WQEs executed (or flushed)
	CQEs          uint64 // CQEs written
	ErrorCQEs     uint64 // of them, error CQEs
	Overruns      uint64 // CQ overruns (async CQ_ERR)
	RNRWaits      uint64 // sends that found no receive and waited
	Faults        uint64 // objects whose memory the application unmapped while they lived
}

// Device is one model adapter with one port. Every Context opened on it
// shares its QP numbers, memory keys and wire, so QPs of different
// contexts talk to each other. A Device is safe for concurrent use.
type Device struct {
	opts Options

	// mu guards everything below, and the state of every object of every
	// context: the HCA goroutine holds it while it works, each command
	// while it runs.
	mu         sync.Mutex
	ctxs       []*Context
	qps        map[uint32]*qp // by QPN
	qpOrder    []*qp          // sortedQPs' answer, reused
	cqs        map[uint32]*cq // by CQN
	mrs        map[uint32]*mr // by key
	nextQPN    uint32
	nextCQN    uint32
	nextSRQN   uint32
	nextKey    uint32
	nextUAR    uint32
	inject     map[uint32][]uint8 // QPN -> syndromes of its next send WQEs
	violations []string
	stats      Stats
	closed     bool
	removed    bool      // Remove ran: the driver let go of the device (remove_linux.go)
	born       time.Time // when the free-running clock read 0
	cur        any       // the QP or CQ whose memory the HCA is touching, for faults

	wake chan struct{} // a command asks the HCA to look now
	stop chan struct{}
	done chan struct{}
}

// New starts a model device.
func New(opts Options) *Device {
	if opts.CompVectors <= 0 {
		opts.CompVectors = 2
	}
	d := &Device{
		opts:     opts,
		born:     time.Now(),
		qps:      map[uint32]*qp{},
		cqs:      map[uint32]*cq{},
		mrs:      map[uint32]*mr{},
		nextQPN:  0x1a4,
		nextCQN:  0x402,
		nextSRQN: 0x81,
		nextKey:  0x1200,
		nextUAR:  0x20,
		inject:   map[uint32][]uint8{},
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go d.run()
	return d
}

// Close stops the HCA and releases every context still open (as if their
// fds were closed), then returns Err.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return d.Err()
	}
	d.closed = true
	d.mu.Unlock()
	close(d.stop)
	<-d.done
	d.mu.Lock()
	for len(d.ctxs) > 0 {
		d.ctxs[0].releaseLocked()
	}
	d.mu.Unlock()
	return d.Err()
}

// Err returns the violations the model found, joined, or nil.
func (d *Device) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.violations) == 0 {
		return nil
	}
	errs := make([]error, len(d.violations))
	for i, v := range d.violations {
		errs[i] = errors.New(v)
	}
	return errors.Join(errs...)
}

// Violations returns what the model found wrong so far.
func (d *Device) Violations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.violations...)
}

// violate records a violation; d.mu is held.
func (d *Device) violate(format string, args ...any) {
	const max = 100
	if len(d.violations) < max {
		d.violations = append(d.violations, "mlx5model: "+fmt.Sprintf(format, args...))
	}
}

// Stats returns the counters.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// InjectError makes the next send WQE that QP qpn executes fail with
// syndrome (an MLX5_CQE_SYNDROME_*): it completes with a requester error
// CQE whether signaled or not, the QP goes to the error state, and what
// follows is flushed. Calls queue: each takes one WQE.
func (d *Device) InjectError(qpn uint32, syndrome uint8) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inject[qpn] = append(d.inject[qpn], syndrome)
}

// QPState returns the state of QP qpn (IB_QPS_*), and whether it exists.
func (d *Device) QPState(qpn uint32) (uint8, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	q, ok := d.qps[qpn]
	if !ok {
		return 0, false
	}
	return q.state, true
}

// kick tells the HCA to look now rather than at the end of its back-off.
func (d *Device) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// run is the HCA: it scans until Close.
func (d *Device) run() {
	defer close(d.done)
	// A ring the application unmapped under a live object faults here;
	// the fault becomes a panic that step recovers, not a crash.
	debug.SetPanicOnFault(true)
	idle := 0
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		if d.step() {
			idle = 0
			continue
		}
		idle++
		if idle < 64 {
			continue // spin a little: most doorbells come in bursts
		}
		wait := time.Duration(min(idle-63, 100)) * 10 * time.Microsecond // up to 1 ms
		t.Reset(wait)
		select {
		case <-d.stop:
			return
		case <-d.wake:
			idle = 0
		case <-t.C:
		}
	}
}

// step makes one pass over every doorbell and every QP with work; it
// reports whether it did anything.
func (d *Device) step() (busy bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			d.fault(r)
			busy = true
		}
	}()
	now := time.Now()
	for i := 0; i < len(d.ctxs); i++ {
		c := d.ctxs[i]
		if now.Sub(c.checked) > 5*time.Millisecond {
			c.checked = now
			if !c.fdAlive() {
				c.releaseLocked() // the application closed the uverbs fd
				i--
				continue
			}
		}
		if c.faulted || c.removed {
			continue
		}
		if c.scanUARs() {
			busy = true
		} else {
			c.watchArms(now)
		}
	}
	for _, q := range d.sortedQPs() {
		if q.ctx.faulted || !q.needsWork() {
			continue
		}
		if d.work(q) {
			busy = true
		}
	}
	return busy
}

// drainDoorbells takes every doorbell rung so far, before a command runs:
// the application's MMIO writes reach the device before the command it
// issues after them.
func (d *Device) drainDoorbells() {
	for _, c := range d.ctxs {
		if !c.faulted && !c.removed {
			c.scanUARs()
		}
	}
}

// on makes x the object the HCA is touching, until the returned func
// restores the previous one.
func (d *Device) on(x any) func() {
	prev := d.cur
	d.cur = x
	return func() { d.cur = prev }
}

// fault handles a fault in application memory. The kernel pins what it
// is given, so a device never faults: it goes on reading and writing
// pages nobody sees once the application unmapped them. The model cannot
// pin, so it treats the object whose memory is gone as dead. A fault
// with no object is the model's own bug.
func (d *Device) fault(r any) {
	d.stats.Faults++
	switch x := d.cur.(type) {
	case *qp:
		x.dead = true
	case *cq:
		x.dead = true
	default:
		d.violate("the model faulted outside any object: %v\n%s", r, debug.Stack())
		for _, c := range d.ctxs {
			c.faulted = true
		}
	}
	d.cur = nil
}

// sortedQPs lists the QPs in QPN order, for a deterministic pass.
//
// It reuses one slice, so that a scan allocates nothing: tests that count
// the allocations of the provider's hot paths count the model's too.
func (d *Device) sortedQPs() []*qp {
	clear(d.qpOrder)
	out := d.qpOrder[:0]
	for _, q := range d.qps {
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b *qp) int { return cmp.Compare(a.qpn, b.qpn) })
	d.qpOrder = out
	return out
}

// NewContext opens a model uverbs fd: a memfd the provider mmaps UARs
// from, and the Kernel that answers its commands. Hand both to
// devhook.Open (or transport.NewKernelConn); whoever holds the fd closes
// it, and the model releases the context's objects when it sees that, as
// the kernel does.
func (d *Device) NewContext() (*Context, error) {
	fd, err := unix.MemfdCreate("mlx5model-uverbs", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("mlx5model: memfd: %w", err)
	}
	// Sparse: room for the static UAR pages (cmd<<8|index pages) and the
	// dynamic ones, which the kernel places from page 9<<16 on.
	if err := unix.Ftruncate(fd, int64(dynUARFirstPage+maxDynUARs)*uarPageSize); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mlx5model: memfd size: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mlx5model: memfd: %w", err)
	}
	c := &Context{d: d, fd: fd, dev: uint64(st.Dev), ino: st.Ino, handles: map[uint32]any{},
		uidxs: map[uint32]*qp{}, channels: map[int]*eventPipe{}, checked: time.Now()}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		unix.Close(fd)
		return nil, errors.New("mlx5model: device closed")
	}
	if d.removed {
		unix.Close(fd)
		return nil, fmt.Errorf("mlx5model: device removed: %w", unix.ENODEV)
	}
	d.ctxs = append(d.ctxs, c)
	return c, nil
}

// Context is one open uverbs fd on the model: a transport.Kernel.
type Context struct {
	d        *Device
	fd       int // the memfd standing for the uverbs fd (the application's)
	dev, ino uint64

	// Guarded by d.mu:
	released   bool
	faulted    bool
	removed    bool // disassociated by Device.Remove: handles hold tombs
	checked    time.Time
	ucontext   bool // GET_CONTEXT done
	dynUAR     bool
	cqeVersion uint8
	handles    map[uint32]any     // the uobject table: handle -> *pd, *mr, *cq, *qp, *ah, *uar
	async      *eventPipe         // the default async event fd
	channels   map[int]*eventPipe // completion channels, by the fd the application holds
	uars       []*uar             // every UAR page mapped (static and dynamic)
	static     []*uar             // static UAR pages, by index
	bfregs     uint32             // static blue-flame registers (tot_bfregs)
	lowLat     uint32             // of them, low-latency ones
	nextBfreg  uint32
	nextDynUAR uint32
	uidxs      map[uint32]*qp // cqe_version 1: user index -> QP
}

// FD returns the memfd that stands for the uverbs fd.
func (c *Context) FD() int { return c.fd }

// Close releases the context as the kernel does when its fd closes:
// every object is destroyed. The fd itself is its holder's to close.
func (c *Context) Close() {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.releaseLocked()
}

// fdAlive reports whether the application still holds the fd.
func (c *Context) fdAlive() bool {
	var st unix.Stat_t
	return unix.Fstat(c.fd, &st) == nil && uint64(st.Dev) == c.dev && st.Ino == c.ino
}

// releaseLocked destroys everything the context holds, QPs first.
func (c *Context) releaseLocked() {
	if c.released {
		return
	}
	c.released = true
	d := c.d
	for i, x := range d.ctxs {
		if x == c {
			d.ctxs = append(d.ctxs[:i], d.ctxs[i+1:]...)
			break
		}
	}
	for _, kind := range []string{"qp", "srq", "ah", "mr", "cq", "uar", "pd"} {
		for h, o := range c.handles {
			switch o := o.(type) {
			case *qp:
				if kind == "qp" {
					c.destroyQP(o)
				}
			case *srq:
				if kind == "srq" {
					c.destroySRQ(o)
				}
			case *ah:
				if kind == "ah" {
					delete(c.handles, h)
				}
			case *mr:
				if kind == "mr" {
					delete(d.mrs, o.key)
					delete(c.handles, h)
				}
			case *cq:
				if kind == "cq" {
					c.destroyCQ(o)
				}
			case *uar:
				if kind == "uar" {
					c.freeUAR(o)
					delete(c.handles, h)
				}
			case *pd:
				if kind == "pd" {
					delete(c.handles, h)
				}
			}
		}
	}
	for _, u := range c.static {
		c.freeUAR(u)
	}
	c.static = nil
	for fd, p := range c.channels {
		p.close()
		delete(c.channels, fd)
	}
	if c.async != nil {
		c.async.close()
		c.async = nil
	}
}

// newHandle returns the lowest free handle, as the kernel's xarray does.
func (c *Context) newHandle(o any) uint32 {
	for h := uint32(0); ; h++ {
		if _, used := c.handles[h]; !used {
			c.handles[h] = o
			return h
		}
	}
}

// pipeIno returns the inode of fd, or 0.
func fdIno(fd int) uint64 {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return 0
	}
	return st.Ino
}

// eventPipe is a completion channel or async event fd: a pipe whose read
// end the application holds and reads events from; the model writes
// them. A mirror of what is queued in it lets the model count the events
// the application has read, as the kernel counts them.
type eventPipe struct {
	w, r  int // write end (the model's), read end (the application's fd number)
	ino   uint64
	size  int        // event size: 8 (completion) or 16 (async)
	queue []eventKey // events written and, as far as the model knows, unread; oldest first
	dead  bool       // the application closed the read end
	keep  int        // after Device.Remove, the old read end of a completion channel (or -1)
}

// eventKey names the object an event is about.
type eventKey struct {
	kind   uint8 // 0 CQ, 1 QP, 2 device, 3 SRQ
	handle uint64
}

func newEventPipe(size int) (*eventPipe, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	return &eventPipe{r: p[0], w: p[1], ino: fdIno(p[0]), size: size, keep: -1}, nil
}

// post queues one event; false if the reader is gone or the pipe full.
func (p *eventPipe) post(b []byte, k eventKey) bool {
	if p.dead || p.w < 0 {
		return false
	}
	n, err := unix.Write(p.w, b)
	if errors.Is(err, unix.EPIPE) {
		p.dead = true
		return false
	}
	if err != nil || n != len(b) {
		return false
	}
	p.queue = append(p.queue, k)
	return true
}

// sync trims the mirror to the events still in the pipe: the reader has
// taken the oldest.
func (p *eventPipe) sync() {
	if p.w < 0 {
		p.queue = p.queue[:0]
		return
	}
	// FIONREAD writes a C int: IoctlGetInt would read 8 bytes, wrong on
	// 64-bit big-endian machines.
	n, err := unix.IoctlGetUint32(p.w, unix.TIOCINQ)
	if err != nil {
		return
	}
	left := (int(n) + p.size - 1) / p.size
	if left < len(p.queue) {
		p.queue = append(p.queue[:0], p.queue[len(p.queue)-left:]...)
	}
}

// unread returns how many queued events are about k.
func (p *eventPipe) unread(k eventKey) int {
	p.sync()
	n := 0
	for _, e := range p.queue {
		if e == k {
			n++
		}
	}
	return n
}

// alive reports whether the application still holds the read end.
func (p *eventPipe) alive() bool { return !p.dead && fdIno(p.r) == p.ino }

func (p *eventPipe) close() {
	if p.w >= 0 {
		unix.Close(p.w)
		p.w = -1
	}
	if p.keep >= 0 {
		unix.Close(p.keep)
		p.keep = -1
	}
}

// hexBytes formats bytes for messages.
func hexBytes(b []byte) string {
	var sb strings.Builder
	for i, x := range b {
		if i > 0 && i%4 == 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%02x", x)
	}
	return sb.String()
}
