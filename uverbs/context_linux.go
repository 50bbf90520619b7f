package uverbs

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// Context is an open RDMA device: the uverbs fd with its kernel ucontext,
// like libibverbs' struct ibv_context. Everything else is created from a
// Context and holds it alive.
//
// A Context is safe for concurrent use. Close may run while other calls
// are in flight: it waits for them, and calls after it return an error
// wrapping ErrClosed.
type Context struct {
	dev     Device
	fd      int
	conn    *transport.Conn
	drv     provider.Context // the provider's side
	async   *os.File         // the async event fd, non-blocking
	events  asyncEvents      // reading and counting async events
	vectors int
	cqs     sync.Map // CQ event handle (uint64) -> *cqBackend, for async CQ_ERR and Close
	// flushCaps caches the device's flush capabilities for RegMR
	// (checkFlushAccess): 0 until asked.
	flushCaps atomic.Uint64

	// mu is held for reading by every call that uses fd, and for writing
	// by Close, so the fd number is never reused under a call. The posts
	// are the exception: they hold their QP's send or receive lock
	// instead, which Close takes in turn for every QP in qps, to stop it.
	mu      sync.RWMutex
	closed  atomic.Bool
	qpMu    sync.Mutex               // guards qps and srqs, changed by calls holding mu for reading
	qps     map[*QP]struct{}         // the QPs created and not destroyed; nil once closed
	srqs    map[*SRQ]struct{}        // the SRQs likewise
	chMu    sync.Mutex               // guards chans, changed by calls holding mu for reading
	chans   map[*cq.Channel]struct{} // the channels created, for Close to end; nil once closed
	chSweep int                      // guarded by chMu: how large chans grows before closed ones are swept out
	cleanup runtime.Cleanup
}

// testConnHook, set by tests only, adjusts a new Context's transport
// (to act as an older kernel).
var testConnHook func(*transport.Conn)

// Open opens the RDMA device named name ("rxe0", "mlx5_0").
func Open(name string) (*Context, error) {
	d, err := DeviceByName(name)
	if err != nil {
		return nil, err
	}
	return d.Open()
}

// driverNames names the drivers goverbs knows but has no provider for yet.
var driverNames = map[uint32]string{
	uapi.RDMA_DRIVER_MLX4: "mlx4",
	uapi.RDMA_DRIVER_EFA:  "efa",
}

// Open opens the device: its uverbs char device, a ucontext on it
// (GET_CONTEXT, by ioctl or the legacy write command), and an async event
// fd so that no async event (CQ errors among them) is lost.
func (d Device) Open() (*Context, error) {
	fail := func(err error) (*Context, error) { return nil, &OpError{Op: "open", Device: d.Name, Err: err} }
	drv, ok := provider.Lookup(d.DriverID)
	if !ok {
		name, ok := driverNames[d.DriverID]
		if !ok {
			name = fmt.Sprintf("driver id %d", d.DriverID)
		}
		return fail(fmt.Errorf("no goverbs provider for %s yet (have: rxe, mlx5): %w", name, ErrNotSupported))
	}
	fd, err := unix.Open(d.Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", d.Path, err))
	}
	conn := transport.NewConn(fd, d.DriverID)
	if testConnHook != nil {
		testConnHook(conn)
	}
	return d.open(drv, fd, conn)
}

// open creates the ucontext on an open uverbs fd (or a device model's),
// closing fd on failure.
func (d Device) open(drv provider.Driver, fd int, conn *transport.Conn) (*Context, error) {
	fail := func(err error) (*Context, error) { return nil, &OpError{Op: "open", Device: d.Name, Err: err} }
	pctx, kctx, err := drv.Open(conn, fd)
	if err != nil {
		unix.Close(fd)
		return fail(fmt.Errorf("get context: %w", err))
	}
	asyncFD := kctx.AsyncFD
	if asyncFD < 0 {
		if asyncFD, err = kverbs.AsyncEventAlloc(conn); err != nil {
			pctx.Close()
			unix.Close(fd)
			return fail(fmt.Errorf("async event alloc: %w", err))
		}
	}
	if err := unix.SetNonblock(asyncFD, true); err != nil {
		pctx.Close()
		unix.Close(asyncFD)
		unix.Close(fd)
		return fail(fmt.Errorf("async fd: %w", err))
	}
	c := &Context{
		dev:     d,
		fd:      fd,
		conn:    conn,
		drv:     pctx,
		async:   os.NewFile(uintptr(asyncFD), d.Name+"-async"),
		vectors: int(kctx.NumCompVectors),
	}
	c.qps = make(map[*QP]struct{})
	c.srqs = make(map[*SRQ]struct{})
	c.chans = make(map[*cq.Channel]struct{})
	c.events.onEvent = c.noteAsync
	// A forgotten Context closes its fd; the kernel then destroys every
	// object on it. It closes the async fd too, which ends the async
	// watcher. The argument holds the fds alone, never c.
	c.cleanup = runtime.AddCleanup(c, func(f forgotten) {
		unix.Close(f.fd)
		f.async.Close()
	}, forgotten{fd, c.async})
	// The async watcher starts now, so that a CQ_ERR breaks its CQ even
	// if nothing ever asks for async events.
	if err := c.events.init(c); err != nil {
		c.Close()
		return fail(fmt.Errorf("async fd: %w", err))
	}
	return c, nil
}

// forgotten is what the cleanup of a forgotten Context closes.
type forgotten struct {
	fd    int
	async *os.File
}

// Device returns the device the Context was opened on.
func (c *Context) Device() Device { return c.dev }

// NumCompVectors returns how many completion vectors the device has: a CQ's
// vector is in [0, NumCompVectors).
func (c *Context) NumCompVectors() int { return c.vectors }

// use takes the context for a call on its fd; done must follow. The hot
// paths (QP.PostSend, cqBackend.ReqNotify) write both out: use is not
// inlined (its error), and a call in every post or arm is not free.
func (c *Context) use(op string) error {
	c.mu.RLock()
	if c.closed.Load() {
		c.mu.RUnlock()
		return &OpError{Op: op, Device: c.dev.Name, Err: ErrClosed}
	}
	return nil
}

func (c *Context) done() { c.mu.RUnlock() }

// addQP and removeQP keep c.qps; the caller holds c.mu for reading.
func (c *Context) addQP(q *QP) {
	c.qpMu.Lock()
	c.qps[q] = struct{}{}
	c.qpMu.Unlock()
}

func (c *Context) removeQP(q *QP) {
	c.qpMu.Lock()
	delete(c.qps, q)
	c.qpMu.Unlock()
}

// addSRQ and removeSRQ keep c.srqs; the caller holds c.mu for reading.
func (c *Context) addSRQ(s *SRQ) {
	c.qpMu.Lock()
	c.srqs[s] = struct{}{}
	c.qpMu.Unlock()
}

func (c *Context) removeSRQ(s *SRQ) {
	c.qpMu.Lock()
	delete(c.srqs, s)
	c.qpMu.Unlock()
}

// srqFailed stops the posts of the SRQ an SRQ_ERR names (noteAsync).
func (c *Context) srqFailed(handle uint64) {
	var failed *SRQ
	c.qpMu.Lock()
	for s := range c.srqs {
		if s.handle == handle {
			failed = s
			break
		}
	}
	c.qpMu.Unlock()
	if failed != nil { // without qpMu, as deviceFatal
		failed.halt(ErrSRQFailed)
	}
}

// deviceFatal ends the data path once the device reported DEVICE_FATAL
// (the async watcher, or TryAsyncEvent, read it; noteAsync): every QP's
// and SRQ's post fails with ErrDeviceFatal, before it writes a ring or
// rings a doorbell the device no longer reads, and then every CQ does
// (Poll once it has handed out what the ring still holds, ReqNotify at
// once); so a program that sees a CQ fail finds the posts failing too.
// A CQ, QP or SRQ made meanwhile fails itself (NewCQ, NewQP and NewSRQ
// read events.fatal once it joined the Context). The completion channels
// need nothing: when the device goes, the kernel fails their fds (EIO),
// which wakes their waiters.
func (c *Context) deviceFatal() {
	c.qpMu.Lock()
	qps := make([]*QP, 0, len(c.qps))
	for q := range c.qps {
		qps = append(qps, q)
	}
	srqs := make([]*SRQ, 0, len(c.srqs))
	for s := range c.srqs {
		srqs = append(srqs, s)
	}
	c.qpMu.Unlock()
	for _, q := range qps { // without qpMu: QP.Close holds the post locks while it takes it
		q.halt(ErrDeviceFatal)
	}
	for _, s := range srqs {
		s.halt(ErrDeviceFatal)
	}
	c.cqs.Range(func(_, v any) bool {
		v.(*cqBackend).fail(ErrDeviceFatal)
		return true
	})
}

// opErr wraps err as the failure of op on this device.
func (c *Context) opErr(op string, err error) error {
	return &OpError{Op: op, Device: c.dev.Name, Err: err}
}

// Close closes the device. The kernel destroys whatever is still open on
// it (QPs, SRQs, CQs, MRs, PDs), so close those first to see their errors. It
// waits for the calls in flight, posts included; those after it return
// an error wrapping ErrClosed, as does a second Close. Closing the
// Context ends its CQs and completion channels too: a Wait parked on one
// of its channels wakes with ErrClosed, and every later call on its CQs
// and channels (Poll included) returns ErrClosed.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed.Swap(true) {
		c.mu.Unlock()
		return c.opErr("close", ErrClosed)
	}
	// The posts in flight, which hold their QP's send or receive lock (or
	// their SRQ's) and not mu, end before the fd and the provider's
	// mappings go; a post that takes its lock later finds it stopped.
	c.qpMu.Lock()
	qps, srqs := c.qps, c.srqs
	c.qps, c.srqs = nil, nil
	c.qpMu.Unlock()
	for q := range qps {
		q.sendMu.Lock()
		q.recvMu.Lock()
		q.stop = ErrClosed
		q.recvMu.Unlock()
		q.sendMu.Unlock()
	}
	for s := range srqs {
		s.halt(ErrClosed)
	}
	c.cleanup.Stop()
	// The channels are closed for their waits before the kernel objects
	// go, so that a Wait the closing wakes (a device model fails the fd)
	// says ErrClosed.
	c.chMu.Lock()
	chans := c.chans
	c.chans = nil
	c.chMu.Unlock()
	for ch := range chans {
		cqHooks.ShutChannel(ch, false) // marks it only
	}
	perr := c.drv.Close()
	aerr := c.async.Close() // ends the async watcher
	err := c.conn.Close()   // the kernel destroys what is still open
	// The CQs and channels are ended without mu: a CQ's Close holds the
	// CQ's lock while it takes mu for reading (cqBackend.Destroy), so the
	// CQ's lock is taken here only after mu is given back. The provider's
	// context is released after them: a Poll until a CQ is ended still
	// reaches the provider's memory (mlx5's doorbell records).
	c.mu.Unlock()
	c.events.wakeWaits() // they see closed
	c.cqs.Range(func(_, v any) bool {
		b := v.(*cqBackend)
		if q := b.q.Load(); q != nil { // nil: NewCQ, still running, ends it
			cqHooks.ShutCQ(q, b.CQ.Release)
		}
		return true
	})
	for ch := range chans {
		cqHooks.ShutChannel(ch, true) // its fds
	}
	c.drv.Release()
	// The QPs' rings go last: on rxe they are mappings of the device
	// file, which keep the kernel's context (and every object on it)
	// alive while they stay mapped; on mlx5 they are memory the device
	// writes, which it no longer may once the provider is released.
	for q := range qps {
		q.contextClosed()
	}
	for s := range srqs { // after its QPs, as the kernel destroyed them
		s.contextClosed()
	}
	if err == nil && aerr != nil {
		err = aerr
	}
	if err == nil && perr != nil {
		err = perr
	}
	if err != nil {
		return c.opErr("close", err)
	}
	return nil
}
