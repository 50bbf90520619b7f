package rdmacm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/fdturn"
	"github.com/goverbs/goverbs/internal/ucma"
	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// eventState is an Event's bookkeeping: the channel it returns to, the
// ID whose count it is on, and the bytes of its private data.
type eventState struct {
	ch    *EventChannel
	owner *ID
	live  atomic.Bool // handed out and not acknowledged
	pdata [uapi.RDMA_MAX_PRIVATE_DATA]byte
}

// uids numbers IDs for the kernel's events (CREATE_ID's uid, echoed in
// every event), process-wide, so that an ID keeps its number when it
// migrates to another channel.
var uids atomic.Uint64

// maxFreeEvents bounds the acknowledged Events a channel keeps for reuse.
const maxFreeEvents = 64

// EventChannel is one open rdma_cm file descriptor
// (rdma_create_event_channel): the IDs made on it, and the events
// they report. Close destroys every ID still on it.
//
// Its methods are safe for concurrent use. Wait and TryWait may be
// called from many goroutines; one at a time reads the fd, parked on the
// Go runtime's poller (no OS thread blocked), and each event goes to
// exactly one of them.
type EventChannel struct {
	c      *ucma.Conn
	rd     fdturn.Reader      // the turn to read the fd, and the wait on the poller
	readFn func(uintptr) bool // = ch.readEvent, bound once: no allocation per wait
	closed atomic.Bool

	mu   sync.Mutex     // guards the fields below
	ids  map[uint64]*ID // by uid
	kids map[uint32]*ID // by the kernel's number, for events an old kernel sent with uid 0
	free []*Event       // acknowledged, for reuse

	// Held by the holder of rd's turn.
	kev  ucma.Event
	kerr error
}

// NewEventChannel opens the rdma_cm device (rdma_create_event_channel).
// It fails with an error wrapping ENOENT where the rdma_ucm module is not
// loaded.
func NewEventChannel() (*EventChannel, error) {
	c, err := ucma.Open()
	if err != nil {
		return nil, rewrap("create event channel", "rdma_cm", err)
	}
	ch := &EventChannel{c: c, ids: map[uint64]*ID{}, kids: map[uint32]*ID{}}
	if err := ch.rd.Init(c.File()); err != nil {
		c.Close()
		return nil, &OpError{Op: "create event channel", Device: "rdma_cm", Err: err}
	}
	ch.readFn = ch.readEvent
	return ch, nil
}

// rewrap gives an error from internal/ucma (an *OpError naming the
// command and "rdma_cm") this package's op and address.
func rewrap(op, where string, err error) error {
	var oe *errs.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &OpError{Op: op, Device: where, Err: err}
}

// Close destroys the channel and every ID still on it, with their
// connections (rdma_destroy_event_channel, which instead refuses while IDs
// remain). A Wait in progress returns ErrClosed; so does every later call
// on the channel and its IDs.
func (ch *EventChannel) Close() error {
	if !ch.closed.CompareAndSwap(false, true) {
		return &OpError{Op: "destroy event channel", Device: "rdma_cm", Err: ErrClosed}
	}
	ids := ch.registered()
	err := ch.c.Close() // wakes a parked Wait; the kernel destroys every id on the fd
	for _, id := range ids {
		id.gone(ch)
	}
	if err != nil {
		return rewrap("destroy event channel", "rdma_cm", err)
	}
	return nil
}

// registered returns the IDs on the channel now.
func (ch *EventChannel) registered() []*ID {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ids := make([]*ID, 0, len(ch.ids))
	for _, id := range ch.ids {
		ids = append(ids, id)
	}
	return ids
}

func (ch *EventChannel) register(id *ID) {
	ch.mu.Lock()
	ch.ids[id.uid] = id
	ch.kids[id.kid] = id
	ch.mu.Unlock()
}

func (ch *EventChannel) unregister(id *ID) {
	ch.mu.Lock()
	if ch.ids[id.uid] == id {
		delete(ch.ids, id.uid)
	}
	if ch.kids[id.kid] == id {
		delete(ch.kids, id.kid)
	}
	ch.mu.Unlock()
}

// NewID creates an ID in port space ps (rdma_create_id). PortSpaceTCP is
// the usual one (RC); PortSpaceUDP and PortSpaceIPoIB make UD IDs, whose
// QP is UD and whose events carry Event.UD. Any other is an error
// wrapping EINVAL, as the kernel answers librdmacm.
func (ch *EventChannel) NewID(ps PortSpace) (*ID, error) {
	const op = "create id"
	if ps != PortSpaceTCP && ps != PortSpaceIB && !ps.ud() {
		return nil, &OpError{Op: op, Device: "rdma_cm", Err: fmt.Errorf("port space %v: %w", ps, errInvalid)}
	}
	if ch.closed.Load() {
		return nil, &OpError{Op: op, Device: "rdma_cm", Err: ErrClosed}
	}
	uid := uids.Add(1)
	const qptRC = 2 // IB_QPT_RC: counts in PortSpaceIB only
	kid, err := ch.c.CreateID(uid, uint16(ps), qptRC)
	if err != nil {
		return nil, rewrap(op, "rdma_cm", ch.closedErr(err))
	}
	id := &ID{ps: ps, uid: uid, ch: ch, kid: kid}
	ch.register(id)
	return id, nil
}

// closedErr is err, or ErrClosed when the channel was closed under the call.
func (ch *EventChannel) closedErr(err error) error {
	if ch.closed.Load() {
		return ErrClosed
	}
	return err
}

// readEvent is the poller's callback: one GET_EVENT, false only when
// none is queued.
func (ch *EventChannel) readEvent(uintptr) bool {
	ch.kev, ch.kerr = ch.c.GetEvent()
	return !ucma.IsNoEvent(ch.kerr)
}

// Wait returns the next event (rdma_get_cm_event), parking the goroutine
// on the Go runtime's poller while none is queued. It reads the fd before
// it parks, so no queued event waits for a readiness that already came.
// It ends with an error wrapping ctx's error when ctx ends first (a
// deadline's also wraps os.ErrDeadlineExceeded), and ErrClosed when the
// channel is closed.
//
// Events are the kernel's, with two exceptions that librdmacm makes too:
// for an ID with a QP (ID.AttachQP), CONNECT_RESPONSE is handled here (the
// QP goes to RTR and RTS, and the connection is established) and
// reported as ESTABLISHED, or as CONNECT_ERROR if that failed; and a
// REJECTED or DISCONNECTED that follows such a CONNECT_ERROR is dropped.
// A REJECTED, UNREACHABLE or CONNECT_ERROR moves the ID's QP to the error
// state, so that work posted to it flushes.
func (ch *EventChannel) Wait(ctx context.Context) (*Event, error) {
	const op = "get cm event"
	if err := ch.rd.Lock(ctx); err != nil {
		return nil, &OpError{Op: op, Device: "rdma_cm", Err: ctxErr(err)}
	}
	defer ch.rd.Unlock()
	for {
		if ch.closed.Load() {
			return nil, &OpError{Op: op, Device: "rdma_cm", Err: ErrClosed}
		}
		if err := ctx.Err(); err != nil { // an event already queued, or the end
			if !ch.readEvent(0) {
				return nil, &OpError{Op: op, Device: "rdma_cm", Err: ctxErr(err)}
			}
		} else if err := ch.rd.Wait(ctx, ch.readFn); err != nil { // its first read is before it parks
			switch {
			case ch.closed.Load():
				err = ErrClosed
			case err == ctx.Err():
				err = ctxErr(err)
			}
			return nil, &OpError{Op: op, Device: "rdma_cm", Err: err}
		}
		if ch.kerr != nil {
			return nil, rewrap(op, "rdma_cm", ch.closedErr(ch.kerr))
		}
		if ev := ch.dispatch(&ch.kev); ev != nil {
			return ev, nil
		}
	}
}

// TryWait returns the next event and true if one is queued, and false if
// none is (or another goroutine is reading the channel). It never
// blocks, and after warm-up allocates nothing.
func (ch *EventChannel) TryWait() (*Event, bool, error) {
	const op = "get cm event"
	if !ch.rd.TryLock() {
		return nil, false, nil
	}
	defer ch.rd.Unlock()
	for {
		if ch.closed.Load() {
			return nil, false, &OpError{Op: op, Device: "rdma_cm", Err: ErrClosed}
		}
		if !ch.readEvent(0) {
			return nil, false, nil
		}
		if ch.kerr != nil {
			return nil, false, rewrap(op, "rdma_cm", ch.closedErr(ch.kerr))
		}
		if ev := ch.dispatch(&ch.kev); ev != nil {
			return ev, true, nil
		}
	}
}

// newEvent takes an Event from the channel's free list, or makes one.
func (ch *EventChannel) newEvent() *Event {
	ch.mu.Lock()
	var e *Event
	if n := len(ch.free); n > 0 {
		e = ch.free[n-1]
		ch.free = ch.free[:n-1]
	}
	ch.mu.Unlock()
	if e == nil {
		e = new(Event)
	}
	e.ev.ch = ch
	return e
}

// recycle gives back an Event that was never handed out.
func (ch *EventChannel) recycle(e *Event) {
	e.Type, e.Status, e.ID, e.ListenID, e.Param = 0, 0, nil, nil, ConnParam{}
	e.ev.owner = nil
	e.ev.live.Store(false)
	ch.mu.Lock()
	if len(ch.free) < maxFreeEvents {
		ch.free = append(ch.free, e)
	}
	ch.mu.Unlock()
}

// fill copies the kernel's event into e, its private data into e's own
// buffer.
func (e *Event) fill(k *ucma.Event) {
	e.Type = EventType(k.Type)
	e.Status = int(k.Status)
	p := k.ConnParam()
	n := copy(e.ev.pdata[:], p.PrivateData)
	e.UD = UDParam{} // fillUD sets it on a UD ID's events
	e.Param = ConnParam{
		PrivateData:        e.ev.pdata[:n:n],
		ResponderResources: p.ResponderResources,
		InitiatorDepth:     p.InitiatorDepth,
		FlowControl:        p.FlowControl,
		RetryCount:         p.RetryCount,
		RNRRetryCount:      p.RNRRetryCount,
		SRQ:                p.SRQ,
		QPNum:              p.QPNum,
	}
}

// dispatch turns the kernel's event into the Event handed out, or nil
// for one that is dropped (its ID is gone, or it follows a failed
// establishment). The caller holds the turn.
func (ch *EventChannel) dispatch(k *ucma.Event) *Event {
	if k.Type == uapi.RDMA_CM_EVENT_CONNECT_REQUEST {
		return ch.connectRequest(k)
	}
	ch.mu.Lock()
	id := ch.ids[k.UID]
	if id == nil && k.UID == 0 {
		id = ch.kids[k.ID]
	}
	ch.mu.Unlock()
	if id == nil {
		return nil // its ID was closed after the kernel queued the event (or a multicast join's: left out)
	}
	e := ch.newEvent()
	e.fill(k)
	if id.ps.ud() {
		e.fillUD(k)
	}
	e.ID = id
	switch e.Type {
	case EventConnectResponse:
		if id.QP() != nil {
			if err := id.establish(); err != nil {
				e.Type, e.Status = EventConnectError, -int(errnoOf(err))
				id.setConnectError(err)
			} else {
				e.Type = EventEstablished
			}
		}
	case EventRejected, EventDisconnected:
		if id.connectErr() != nil {
			ch.recycle(e)
			return nil
		}
		if e.Type == EventRejected {
			id.qpToErr()
		}
	case EventUnreachable, EventConnectError:
		id.qpToErr()
	}
	if !id.deliver() {
		ch.recycle(e)
		return nil
	}
	e.ev.owner = id
	e.ev.live.Store(true)
	return e
}

// connectRequest makes the ID of a CONNECT_REQUEST, whose kernel id
// GET_EVENT just created: it is the listener's owner's from here, and
// destroyed here if the listener is gone.
func (ch *EventChannel) connectRequest(k *ucma.Event) *Event {
	ch.mu.Lock()
	l := ch.ids[k.UID]
	ch.mu.Unlock()
	if l == nil {
		ch.c.DestroyID(k.ID) // the listener was closed: nobody will answer
		return nil
	}
	cp := k.ConnParam()
	child := &ID{ps: l.ps, uid: uids.Add(1), ch: ch, kid: k.ID, parent: l,
		offerResp: cp.ResponderResources, offerInit: cp.InitiatorDepth}
	ch.register(child)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		ch.unregister(child)
		ch.c.DestroyID(k.ID)
		return nil
	}
	if l.children == nil {
		l.children = map[*ID]struct{}{}
	}
	l.children[child] = struct{}{}
	l.delivered++ // the kernel counts a request on its listener
	l.mu.Unlock()
	e := ch.newEvent()
	e.fill(k)
	if l.ps.ud() {
		e.fillUD(k)
	}
	e.ID, e.ListenID = child, l
	e.ev.owner = l
	e.ev.live.Store(true)
	return e
}

// Ack acknowledges the event (rdma_ack_cm_event): its ID may close once
// all of its events are. The Event is the channel's again after it. A
// second Ack is an error wrapping EINVAL.
func (e *Event) Ack() error {
	st := &e.ev
	if st.ch == nil || !st.live.CompareAndSwap(true, false) {
		return &OpError{Op: "ack cm event", Device: "rdma_cm", Err: fmt.Errorf("event not handed out or already acknowledged: %w", errInvalid)}
	}
	owner := st.owner
	owner.mu.Lock()
	owner.acked++
	owner.mu.Unlock()
	st.ch.recycle(e)
	return nil
}

// errnoOf is the errno inside err, EINVAL if none.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EINVAL
}

// ID is a connection-manager identifier (struct rdma_cm_id): a
// socket-like handle that binds or resolves an address, listens or
// connects, and owns at most one QP (AttachQP) whose state it drives.
// Its events arrive on its EventChannel.
//
// Its methods are safe for concurrent use. Close it when done; an ID a
// CONNECT_REQUEST made that nobody accepted is closed with its listener.
type ID struct {
	ps  PortSpace
	uid uint64
	// offerResp and offerInit are a request's read and atomic depths as
	// the peer offered them, seen from here (set once, at creation).
	offerResp, offerInit uint8

	mu        sync.Mutex    // guards the fields below
	ch        *EventChannel // changes with Migrate
	kid       uint32
	closed    bool
	delivered int // events handed out on this ID's count
	acked     int
	parent    *ID              // the listener of a request's ID, until it is accepted
	children  map[*ID]struct{} // a listener's requests not yet accepted
	qp        *uverbs.QP
	linkIB    bool // the QP's port is InfiniBand (the RTR mask quirk)
	dev       *device
	name      string // the address errors name
	cerr      error  // a failed establishment (CONNECT_RESPONSE)

	// sink is the connection a hub hands the ID's events to.
	sink atomic.Pointer[Conn]
}

// where is the address errors name.
func (id *ID) where() string {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.name == "" {
		return "rdma_cm"
	}
	return id.name
}

func (id *ID) setName(s string) {
	id.mu.Lock()
	id.name = s
	id.mu.Unlock()
}

// conn returns the channel's ucma.Conn and the kernel's number of the id,
// or ErrClosed.
func (id *ID) conn() (*ucma.Conn, uint32, error) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.closed || id.ch.closed.Load() {
		return nil, 0, ErrClosed
	}
	return id.ch.c, id.kid, nil
}

// do runs the kernel command fn on the id, wrapping its error as op's.
func (id *ID) do(op string, fn func(c *ucma.Conn, kid uint32) error) error {
	c, kid, err := id.conn()
	if err == nil {
		if err = fn(c, kid); err != nil {
			var oe *errs.OpError
			if errors.As(err, &oe) {
				err = oe.Err
			}
			if errors.Is(err, errs.ErrClosed) {
				err = ErrClosed
			}
		}
	}
	if err != nil {
		return &OpError{Op: op, Device: id.where(), Err: err}
	}
	return nil
}

// PortSpace returns the ID's port space.
func (id *ID) PortSpace() PortSpace { return id.ps }

// Bind binds the ID to a local address and port (rdma_bind_addr); port 0
// picks a free one. An address on an RDMA device's netdev also binds the
// ID to that device.
func (id *ID) Bind(addr netip.AddrPort) error {
	if id.where() == "rdma_cm" {
		id.setName(addr.String())
	}
	return id.do("bind addr", func(c *ucma.Conn, kid uint32) error {
		return c.Bind(kid, ucma.IPSockaddr(addr))
	})
}

// SetTOS sets the type of service of the ID's packets
// (RDMA_OPTION_ID_TOS), before it resolves its route.
func (id *ID) SetTOS(tos uint8) error {
	return id.do("set option", func(c *ucma.Conn, kid uint32) error { return c.SetTOS(kid, tos) })
}

// SetReuseAddr lets the ID bind an address and port in use
// (RDMA_OPTION_ID_REUSEADDR), before it binds.
func (id *ID) SetReuseAddr(on bool) error {
	return id.do("set option", func(c *ucma.Conn, kid uint32) error { return c.SetReuseAddr(kid, on) })
}

// SetAFOnly makes an ID bound to the IPv6 wildcard take IPv6 requests
// only (RDMA_OPTION_ID_AFONLY), before it binds; by default it takes
// IPv4 ones too, as IPv4-mapped addresses.
func (id *ID) SetAFOnly(on bool) error {
	return id.do("set option", func(c *ucma.Conn, kid uint32) error { return c.SetAFOnly(kid, on) })
}

// SetAckTimeout sets the local ACK timeout the CM gives the ID's RC QP
// (RDMA_OPTION_ID_ACK_TIMEOUT), before the QP reaches RTS: how long the
// QP waits for an acknowledgment before it sends again, d rounded up to
// the transport's 4.096 µs × 2^n (n at most 31). A peer that stops
// answering then fails the QP's requests with cq.RetryExcErr after about
// (RetryCount+1) times that (as rxe's timer runs, to the kernel's tick),
// instead of after the timeout the CM derives from the path's packet
// lifetime and the device's ACK delay.
func (id *ID) SetAckTimeout(d time.Duration) error {
	n := ackTimeoutExponent(d)
	return id.do("set option", func(c *ucma.Conn, kid uint32) error { return c.SetAckTimeout(kid, n) })
}

// ResolveAddr starts resolving dst, an IP address and port, to an RDMA
// device (rdma_resolve_addr), binding the ID to src first if src is
// valid. ADDR_RESOLVED or ADDR_ERROR follows; timeout bounds the
// kernel's resolution (at least a millisecond).
func (id *ID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error {
	id.setName(dst.String())
	var s ucma.Sockaddr
	if src.IsValid() {
		s = ucma.IPSockaddr(src)
	}
	return id.do("resolve addr", func(c *ucma.Conn, kid uint32) error {
		return c.ResolveAddr(kid, s, ucma.IPSockaddr(dst), max(timeout, time.Millisecond))
	})
}

// ResolveRoute starts resolving the route to the resolved address
// (rdma_resolve_route). ROUTE_RESOLVED or ROUTE_ERROR follows.
func (id *ID) ResolveRoute(timeout time.Duration) error {
	return id.do("resolve route", func(c *ucma.Conn, kid uint32) error {
		return c.ResolveRoute(kid, max(timeout, time.Millisecond))
	})
}

// Listen makes a bound ID listen for connection requests (rdma_listen):
// each arrives as a CONNECT_REQUEST event with an ID of its own. backlog
// bounds the requests the kernel holds that no Wait has read (0: the
// kernel's maximum).
func (id *ID) Listen(backlog int) error {
	return id.do("listen", func(c *ucma.Conn, kid uint32) error { return c.Listen(kid, backlog) })
}

// Addrs returns the ID's local and remote address and port, as far as
// they are known (rdma_get_local_addr, rdma_get_peer_addr).
func (id *ID) Addrs() (local, remote netip.AddrPort, err error) {
	a, err := id.query()
	return a.Src.IP, a.Dst.IP, err
}

// query returns the kernel's view of the id's addresses and device.
func (id *ID) query() (ucma.AddrInfo, error) {
	var a ucma.AddrInfo
	err := id.do("query addr", func(c *ucma.Conn, kid uint32) error {
		var qerr error
		a, qerr = c.QueryAddr(kid)
		return qerr
	})
	return a, err
}

// PD returns the protection domain that the package shares among the
// IDs and connections on the ID's device (one uverbs.Context and PD per
// device per process, opened on first use), for QPs and MRs. The ID
// must be bound to a device: after Bind to a device's address, address
// resolution, or in a CONNECT_REQUEST. The PD stays valid while the ID
// is open.
func (id *ID) PD() (*uverbs.PD, error) {
	if d := id.device(); d != nil {
		return d.pd, nil
	}
	a, err := id.query()
	if err != nil {
		return nil, err
	}
	return id.pdOf(a)
}

// pdOf is PD, with the ID's addresses and device as the kernel gave
// them (ID.query).
func (id *ID) pdOf(a ucma.AddrInfo) (*uverbs.PD, error) {
	if d := id.device(); d != nil {
		return d.pd, nil
	}
	d, err := acquireDevice(a)
	if err != nil {
		return nil, &OpError{Op: "open device", Device: id.where(), Err: err}
	}
	id.mu.Lock()
	switch {
	case id.closed:
		id.mu.Unlock()
		d.release()
		return nil, &OpError{Op: "open device", Device: id.where(), Err: ErrClosed}
	case id.dev != nil: // a racing call got there first
		d.release()
		d = id.dev
	default:
		id.dev = d
	}
	id.mu.Unlock()
	return d.pd, nil
}

// device returns the shared device PD opened, if it did.
func (id *ID) device() *device {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.dev
}

// InitQPAttr returns the attributes, and their mask, that move the ID's
// QP to state (INIT, RTR or RTS), as the connection manager computes
// them (rdma_init_qp_attr): for callers that drive a QP themselves. An
// attribute uverbs.QP.Modify cannot carry is an error wrapping EINVAL.
func (id *ID) InitQPAttr(state uverbs.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	var (
		a  uverbs.QPAttr
		m  uverbs.QPAttrMask
		ib = id.isLinkIB()
	)
	err := id.do("init qp attr", func(c *ucma.Conn, kid uint32) error {
		k, mask, err := c.InitQPAttr(kid, uint32(state))
		if err != nil {
			return err
		}
		a, m, err = qpAttrFromKernel(&k, mask, ib)
		return err
	})
	return a, m, err
}

func (id *ID) isLinkIB() bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.linkIB
}

// QP returns the QP AttachQP gave the ID, or nil.
func (id *ID) QP() *uverbs.QP {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.qp
}

// AttachQP gives the ID its QP (of type RC, in RESET, on the ID's
// device) and moves it to INIT with the connection manager's attributes
// (the half of rdma_create_qp after the QP exists). On a UD ID the QP is
// UD, and goes on to RTR and RTS (SQ PSN 0) at once, its Q_Key from
// INIT. From then on the ID drives it: Connect sends its number, CONNECT_RESPONSE takes it to RTR
// and RTS (see EventChannel.Wait), Accept does so before it answers, and
// Disconnect and the failure events move it to the error state. Closing
// the QP stays the caller's, after the ID is done with it.
func (id *ID) AttachQP(qp *uverbs.QP) error {
	const op = "attach qp"
	if qp == nil {
		return &OpError{Op: op, Device: id.where(), Err: errInvalid}
	}
	id.mu.Lock()
	if id.qp != nil {
		id.mu.Unlock()
		return &OpError{Op: op, Device: id.where(), Err: fmt.Errorf("the ID has a QP: %w", errInvalid)}
	}
	id.mu.Unlock()
	a, m, err := id.InitQPAttr(uverbs.QPInit)
	if err != nil {
		return err
	}
	if ll, err := linkLayer(qp.PD().Context(), a.Port); err == nil {
		id.mu.Lock()
		id.linkIB = ll == uverbs.LinkLayerInfiniBand
		id.mu.Unlock()
	}
	if err := qp.Modify(&a, m); err != nil {
		return &OpError{Op: op, Device: id.where(), Err: err}
	}
	if id.ps.ud() { // a UD QP is ready at once (librdmacm's ucma_init_ud_qp)
		if err := readyUDQP(qp); err != nil {
			return &OpError{Op: op, Device: id.where(), Err: err}
		}
	}
	id.mu.Lock()
	id.qp = qp
	id.mu.Unlock()
	return nil
}

// portKey names a device's port.
type portKey struct {
	guid uverbs.GUID
	port uint8
}

// linkLayers holds each device port's link layer, which never changes:
// the kernel is asked once per port, as librdmacm reads its ports once
// per device.
var linkLayers sync.Map // portKey -> uverbs.LinkLayer

// linkLayer returns the link layer under port of ctx's device.
func linkLayer(ctx *uverbs.Context, port uint8) (uverbs.LinkLayer, error) {
	k := portKey{ctx.Device().NodeGUID, port}
	if ll, ok := linkLayers.Load(k); ok {
		return ll.(uverbs.LinkLayer), nil
	}
	pa, err := ctx.QueryPort(int(port))
	if err != nil {
		return 0, err
	}
	linkLayers.Store(k, pa.LinkLayer)
	return pa.LinkLayer, nil
}

// modifyQP moves the ID's QP to state with the connection manager's
// attributes, resp and init, unless 0xff, replacing its read and atomic
// depths (as target, in RTR, and initiator, in RTS).
func (id *ID) modifyQP(qp *uverbs.QP, state uverbs.QPState, resp, init uint8) error {
	a, m, err := id.InitQPAttr(state)
	if err != nil {
		return err
	}
	if state == uverbs.QPRTR && resp != uapi.RDMA_MAX_RESP_RES {
		a.MaxDestRdAtomic = resp
	}
	if state == uverbs.QPRTS && init != uapi.RDMA_MAX_INIT_DEPTH {
		a.MaxRdAtomic = init
	}
	if err := qp.Modify(&a, m); err != nil {
		return &OpError{Op: "modify qp", Device: id.where(), Err: err}
	}
	return nil
}

// readyQP takes the ID's QP through INIT (again, for the attributes the
// exchange settled), RTR and RTS; resp and init, unless 0xff, replace the
// kernel's read and atomic depths (as target and initiator).
func (id *ID) readyQP(qp *uverbs.QP, resp, init uint8) error {
	for _, state := range [...]uverbs.QPState{uverbs.QPInit, uverbs.QPRTR, uverbs.QPRTS} {
		if err := id.modifyQP(qp, state, resp, init); err != nil {
			return err
		}
	}
	return nil
}

// qpToErr moves the ID's QP, if any, to the error state: its posted work
// flushes (once: a QP already in ERR has nothing posted left).
func (id *ID) qpToErr() {
	if qp := id.QP(); qp != nil {
		_ = qp.Modify(&uverbs.QPAttr{State: uverbs.QPErr}, uverbs.QPAttrState)
	}
}

// establish is the active side's answer to CONNECT_RESPONSE: the QP to
// RTR and RTS, then ACCEPT with only the id (rdma_establish's RTU).
func (id *ID) establish() error {
	qp := id.QP()
	err := id.readyQP(qp, uapi.RDMA_MAX_RESP_RES, uapi.RDMA_MAX_INIT_DEPTH)
	if err == nil {
		err = id.do("establish", func(c *ucma.Conn, kid uint32) error { return c.Accept(kid, 0, nil, ucma.ECE{}) })
	}
	if err != nil {
		id.qpToErr()
	}
	return err
}

// Establish completes the active side's connection after a
// CONNECT_RESPONSE, for an ID without a QP (rdma_establish): the caller
// has moved its own QP to RTR and RTS. The peer then gets ESTABLISHED.
func (id *ID) Establish() error {
	if id.QP() != nil {
		return &OpError{Op: "establish", Device: id.where(), Err: fmt.Errorf("the ID's QP is established by EventChannel.Wait: %w", errInvalid)}
	}
	return id.do("establish", func(c *ucma.Conn, kid uint32) error { return c.Accept(kid, 0, nil, ucma.ECE{}) })
}

// Notify reports an async event of the ID's QP to the connection manager
// (rdma_notify). The one it acts on is uverbs.EventCommEst: a passive
// side whose QP received data before the active side's RTU came (the RTU
// is late or lost) reports it, and the CM takes the connection as
// established at once, with EventEstablished on the ID, where it would
// otherwise resend its reply until it gave up. Notifying a connection
// already established fails with EISCONN; an event the CM does not act on,
// or a CommEst outside a handshake, fails with EINVAL.
func (id *ID) Notify(event uverbs.AsyncEventType) error {
	return id.do("notify", func(c *ucma.Conn, kid uint32) error { return c.Notify(kid, uint32(event)) })
}

func (id *ID) setConnectError(err error) {
	id.mu.Lock()
	id.cerr = err
	id.mu.Unlock()
}

func (id *ID) connectErr() error {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.cerr
}

// kernParam is p as the kernel takes it, with the QP's number if the ID
// has a QP.
func (id *ID) kernParam(p *ConnParam) *ucma.ConnParam {
	k := &ucma.ConnParam{
		PrivateData:        p.PrivateData,
		QPNum:              p.QPNum,
		SRQ:                p.SRQ,
		ResponderResources: p.ResponderResources,
		InitiatorDepth:     p.InitiatorDepth,
		FlowControl:        p.FlowControl,
		RetryCount:         p.RetryCount,
		RNRRetryCount:      p.RNRRetryCount,
	}
	if qp := id.QP(); qp != nil {
		k.QPNum = qp.QPN()
	}
	return k
}

// Connect sends a connection request on an ID whose route is resolved
// (rdma_connect). A nil p offers what librdmacm's rdma_connect(id, NULL)
// does: the device's most RDMA reads and atomics in flight, both ways,
// and retry counts of 7; so does [MaxResources] in either depth of a
// given p. Private data longer than the port space carries
// (MaxConnectPrivateDataTCP) is an error wrapping EINVAL. The answer is
// ESTABLISHED (with a QP attached) or CONNECT_RESPONSE (without),
// REJECTED, UNREACHABLE or CONNECT_ERROR.
func (id *ID) Connect(p *ConnParam) error {
	const op = "connect"
	if p == nil {
		p = &ConnParam{RetryCount: defaultRetry, RNRRetryCount: defaultRetry,
			ResponderResources: MaxResources, InitiatorDepth: MaxResources}
	}
	if err := checkPrivateData(id.ps, "connect", p.PrivateData); err != nil {
		return &OpError{Op: op, Device: id.where(), Err: err}
	}
	k := id.kernParam(p)
	var err error
	k.ResponderResources, k.InitiatorDepth, err = id.depths(k.ResponderResources, k.InitiatorDepth, MaxResources, MaxResources)
	if err != nil {
		return rewrap(op, id.where(), err)
	}
	id.setConnectError(nil)
	return id.do(op, func(c *ucma.Conn, kid uint32) error { return c.Connect(kid, k, ucma.ECE{}) })
}

// depths returns resp and init with MaxResources in either replaced by
// the device's limit, capped by capResp and capInit (the peer's offer,
// when accepting). A UD ID has no such depths.
func (id *ID) depths(resp, init, capResp, capInit uint8) (uint8, uint8, error) {
	if id.ps.ud() || resp != MaxResources && init != MaxResources {
		return resp, init, nil
	}
	devResp, devInit, err := id.deviceLimits()
	if err != nil {
		return 0, 0, err
	}
	if resp == MaxResources {
		resp = min(capResp, devResp)
	}
	if init == MaxResources {
		init = min(capInit, devInit)
	}
	return resp, init, nil
}

// deviceLimits returns the most RDMA reads and atomics a QP on the ID's
// device takes as target and issues as initiator: the device's that
// ID.PD opened, else that of the QP attached, else it opens the device
// as ID.PD does.
func (id *ID) deviceLimits() (resp, init uint8, err error) {
	if d := id.device(); d != nil {
		return d.maxResp, d.maxInit, nil
	}
	if qp := id.QP(); qp != nil {
		attr, err := qp.PD().Context().QueryDevice()
		if err != nil {
			return 0, 0, err
		}
		return uint8(min(attr.MaxQPRdAtom, MaxResources)), uint8(min(attr.MaxQPInitRdAtom, MaxResources)), nil
	}
	if _, err := id.PD(); err != nil {
		return 0, 0, err
	}
	d := id.device()
	return d.maxResp, d.maxInit, nil
}

// Accept accepts the connection request that made the ID (rdma_accept).
// With a QP attached it first takes the QP to RTR and RTS, its read and
// atomic depths from p; a nil p (or MaxResources in either depth) takes
// the peer's offer, capped by the device, and a nil p an RNR retry count
// of 7. Private data longer than
// MaxAcceptPrivateData is an error wrapping EINVAL. ESTABLISHED follows
// when the peer has answered. A failed Accept, whatever failed, moves the
// QP to the error state and rejects the request, as librdmacm's does: the
// peer's connect ends with REJECTED (reason 28, consumer defined) on an
// RC ID, UNREACHABLE on a UD one.
func (id *ID) Accept(p *ConnParam) error {
	const op = "accept"
	if p == nil {
		p = &ConnParam{RNRRetryCount: defaultRetry, ResponderResources: MaxResources, InitiatorDepth: MaxResources}
	}
	if resp, init, err := id.depths(p.ResponderResources, p.InitiatorDepth, id.offerResp, id.offerInit); err != nil {
		return id.refuse(rewrap(op, id.where(), err))
	} else if resp != p.ResponderResources || init != p.InitiatorDepth {
		q := *p
		q.ResponderResources, q.InitiatorDepth = resp, init
		p = &q
	}
	if err := checkPrivateData(id.ps, "accept", p.PrivateData); err != nil {
		return id.refuse(&OpError{Op: op, Device: id.where(), Err: err})
	}
	qp := id.QP()
	if qp != nil && !id.ps.ud() { // a UD QP is in RTS since AttachQP
		if err := id.readyQP(qp, p.ResponderResources, p.InitiatorDepth); err != nil {
			return id.refuse(err)
		}
	}
	k := id.kernParam(p)
	err := id.do(op, func(c *ucma.Conn, kid uint32) error { return c.Accept(kid, id.uid, k, ucma.ECE{}) })
	if err != nil {
		// The kernel rejected the request itself (rdma_accept's failure
		// path), unless the ID is closed.
		id.qpToErr()
		return err
	}
	id.mu.Lock()
	parent := id.parent
	id.parent = nil
	id.mu.Unlock()
	if parent != nil {
		parent.mu.Lock()
		delete(parent.children, id)
		parent.mu.Unlock()
	}
	return nil
}

// refuse ends a failed Accept before the kernel saw it: the QP to the
// error state, and the request rejected as the kernel rejects one whose
// acceptance fails. It returns err.
func (id *ID) refuse(err error) error {
	id.qpToErr()
	_ = id.do("reject", func(c *ucma.Conn, kid uint32) error { return c.Reject(kid, 0, nil) })
	return err
}

// Reject refuses the connection request that made the ID (rdma_reject),
// with private data for the peer's REJECTED (at most
// MaxRejectPrivateData bytes). Close the ID after it.
func (id *ID) Reject(privateData []byte) error {
	const op = "reject"
	if err := checkPrivateData(id.ps, "reject", privateData); err != nil {
		return &OpError{Op: op, Device: id.where(), Err: err}
	}
	return id.do(op, func(c *ucma.Conn, kid uint32) error { return c.Reject(kid, 0, privateData) })
}

// Disconnect moves the ID's QP to the error state (its posted work
// flushes) and tears down the connection (rdma_disconnect). The peer gets
// DISCONNECTED; this side gets its own once the peer disconnects too
// (on rxe, otherwise, only after the CM's timeout of about 100 s).
func (id *ID) Disconnect() error {
	id.qpToErr()
	return id.do("disconnect", func(c *ucma.Conn, kid uint32) error { return c.Disconnect(kid) })
}

// Migrate moves the ID, and its events not yet read, to another channel
// (rdma_migrate_id). Its events handed out must all be acknowledged
// first (else an error wrapping EBUSY).
func (id *ID) Migrate(to *EventChannel) error {
	const op = "migrate id"
	id.mu.Lock()
	defer id.mu.Unlock()
	switch {
	case id.closed || id.ch.closed.Load() || to.closed.Load():
		return &OpError{Op: op, Device: id.nameLocked(), Err: ErrClosed}
	case id.delivered != id.acked:
		return &OpError{Op: op, Device: id.nameLocked(), Err: &busyError{n: id.delivered - id.acked}}
	case id.ch == to:
		return nil
	}
	from := id.ch
	to.register(id)
	if _, err := to.c.MigrateID(id.kid, from.c); err != nil {
		to.unregister(id)
		return rewrap(op, id.nameLocked(), err)
	}
	from.unregister(id)
	id.ch = to
	return nil
}

func (id *ID) nameLocked() string {
	if id.name == "" {
		return "rdma_cm"
	}
	return id.name
}

// busyError says how many events of an ID are not acknowledged.
type busyError struct{ n int }

func (e *busyError) Error() string {
	return fmt.Sprintf("%d events not acknowledged (Event.Ack): %v", e.n, syscall.EBUSY)
}
func (e *busyError) Unwrap() error { return syscall.EBUSY }

// deliver counts an event handed out on the ID; false if it is closed.
func (id *ID) deliver() bool {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.closed {
		return false
	}
	id.delivered++
	return true
}

// Close destroys the ID (rdma_destroy_id), and the IDs of connection
// requests it got as a listener and nobody accepted (their peers are
// rejected). It never blocks on the application: while events of the ID
// are handed out and not acknowledged it destroys nothing and returns an
// error wrapping EBUSY that says how many. A second Close returns
// ErrClosed. The QP AttachQP gave it is the caller's to close.
func (id *ID) Close() error {
	id.mu.Lock()
	if id.closed {
		id.mu.Unlock()
		return &OpError{Op: "destroy id", Device: id.nameLocked(), Err: ErrClosed}
	}
	if n := id.delivered - id.acked; n > 0 {
		id.mu.Unlock()
		return &OpError{Op: "destroy id", Device: id.nameLocked(), Err: &busyError{n: n}}
	}
	return id.destroyLocked()
}

// destroyLocked destroys the id, whose mu the caller holds (and this
// gives back), whatever events are outstanding.
func (id *ID) destroyLocked() error {
	id.closed = true
	ch, kid, parent, dev, name := id.ch, id.kid, id.parent, id.dev, id.nameLocked()
	children := id.children
	id.children, id.parent, id.dev, id.qp = nil, nil, nil, nil
	id.mu.Unlock()
	ch.unregister(id)
	var err error
	if !ch.closed.Load() {
		if _, derr := ch.c.DestroyID(kid); derr != nil && !ch.closed.Load() {
			err = rewrap("destroy id", name, derr)
		}
	}
	if parent != nil {
		parent.mu.Lock()
		delete(parent.children, id)
		parent.mu.Unlock()
	}
	for c := range children {
		c.abandon()
	}
	if dev != nil {
		dev.release()
	}
	return err
}

// abandon rejects and destroys a request's ID that nobody accepted.
func (id *ID) abandon() {
	id.mu.Lock()
	if id.closed {
		id.mu.Unlock()
		return
	}
	id.mu.Unlock()
	_ = id.Reject(nil)
	id.mu.Lock()
	if id.closed {
		id.mu.Unlock()
		return
	}
	_ = id.destroyLocked()
}

// gone marks an ID whose channel ch closed (the kernel destroyed it).
func (id *ID) gone(ch *EventChannel) {
	id.mu.Lock()
	if id.closed || id.ch != ch {
		id.mu.Unlock()
		return
	}
	id.closed = true
	dev := id.dev
	id.dev, id.qp, id.children = nil, nil, nil
	id.mu.Unlock()
	if dev != nil {
		dev.release()
	}
}
