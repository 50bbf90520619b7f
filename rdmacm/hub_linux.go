package rdmacm

import (
	"context"
	"errors"
	"sync"
)

// hub is the rdma_cm event channel that the package's connections share:
// Dial's and DialUD's, and each accepted one's, which moves there from its
// listener's. One open file and one goroutine reading it serve every
// connection of the process, as a librdmacm program drives all its IDs
// from one channel; a connection costs neither a file of its own nor a
// goroutine. The reader hands each event to its ID's connection
// (ID.sink). The hub is open while any connection is on it: the first
// opens it, the last to go closes it, and the reader ends with it.
type hub struct {
	ch   *EventChannel
	refs int // guarded by hubs.mu
}

var hubs struct {
	mu  sync.Mutex
	cur *hub // nil while no connection is on one
}

// acquireHub returns the hub, opening it if none is open, with a
// reference the caller gives back with release.
func acquireHub() (*hub, error) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	if h := hubs.cur; h != nil {
		h.refs++
		return h, nil
	}
	ch, err := NewEventChannel()
	if err != nil {
		return nil, err
	}
	h := &hub{ch: ch, refs: 1}
	hubs.cur = h
	go h.read()
	return h, nil
}

// release gives back a reference; the last closes the hub.
func (h *hub) release() {
	hubs.mu.Lock()
	h.refs--
	last := h.refs == 0
	if last && hubs.cur == h {
		hubs.cur = nil
	}
	hubs.mu.Unlock()
	if last {
		_ = h.ch.Close()
	}
}

// read hands the hub's events to their connections until the hub
// closes. An event is acknowledged as it is handed over: a connection
// keeps what it needs of it (connEvent). Should reading fail, every
// connection on the hub hears of it, and new ones go to a new hub.
func (h *hub) read() {
	for {
		ev, err := h.ch.Wait(context.Background())
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				h.fail(err)
			}
			return
		}
		c := ev.ID.sink.Load()
		e := connEvent{typ: ev.Type, status: ev.Status}
		switch ev.Type {
		case EventEstablished:
			if ev.ID.ps.ud() {
				e.ud = ev.UD
				e.ud.PrivateData = append([]byte(nil), ev.UD.PrivateData...)
				break
			}
			e.private = append([]byte(nil), ev.Param.PrivateData...)
		case EventRejected:
			e.private = append([]byte(nil), ev.Param.PrivateData...)
		case EventMulticastJoin:
			e.ud = ev.UD // the group: its AH attribute, QPN and Q_Key
		}
		ev.Ack()
		if c != nil {
			c.deliver(e)
		}
	}
}

// fail tells every connection on the hub that its channel failed with
// err, and takes the hub out of use.
func (h *hub) fail(err error) {
	hubs.mu.Lock()
	if hubs.cur == h {
		hubs.cur = nil
	}
	hubs.mu.Unlock()
	for _, id := range h.ch.registered() {
		if c := id.sink.Load(); c != nil {
			c.deliver(connEvent{fail: err})
		}
	}
}

// connEvent is what a connection keeps of an event of its ID: the
// type, the status, and copies of the private data (ESTABLISHED,
// REJECTED) and of a UD peer's parameters (a UD ID's ESTABLISHED); or,
// with fail set, its channel's failure.
type connEvent struct {
	typ     EventType
	status  int
	private []byte
	ud      UDParam
	fail    error
}

// err is the event's status as an error (Event.Err).
func (e *connEvent) err() error { return statusErr(e.typ, e.status, e.private) }

// inbox is a connection's queue of events while it is being set up; once
// it is up (Conn.start), the hub's reader takes it down itself on a
// DISCONNECTED or DEVICE_REMOVAL, and drops its other events.
type inbox struct {
	mu   sync.Mutex
	q    []connEvent // on buf, where two events (a setup's most) fit
	buf  [2]connEvent
	up   bool
	wake chan struct{} // a token once events are queued
}

// deliver takes an event of the connection's ID, from the hub's reader.
func (c *Conn) deliver(e connEvent) {
	in := &c.in
	in.mu.Lock()
	if in.up {
		in.mu.Unlock()
		if e.fail != nil || e.typ == EventDisconnected || e.typ == EventDeviceRemoval {
			c.down()
		}
		return
	}
	in.q = append(in.q, e)
	in.mu.Unlock()
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// next returns the connection's next event, waiting for it until ctx
// ends (an error wrapping ctx's). Its channel's failure is an error.
func (c *Conn) next(ctx context.Context) (connEvent, error) {
	in := &c.in
	for {
		in.mu.Lock()
		if len(in.q) > 0 {
			e := in.q[0]
			n := copy(in.q, in.q[1:]) // staying on the same array
			in.q[n] = connEvent{}
			in.q = in.q[:n]
			in.mu.Unlock()
			if e.fail != nil {
				return e, e.fail
			}
			return e, nil
		}
		in.mu.Unlock()
		select {
		case <-in.wake:
		case <-ctx.Done():
			return connEvent{}, ctxErr(ctx.Err())
		}
	}
}

// start marks the connection up: from here the hub's reader takes it
// down when the peer disconnects or the device goes, including for such
// an event that came while it was set up.
func (c *Conn) start() {
	in := &c.in
	in.mu.Lock()
	in.up = true
	q := in.q
	in.q = nil // q's array is buf: up, deliver queues nothing more
	in.mu.Unlock()
	for _, e := range q {
		if e.fail != nil || e.typ == EventDisconnected || e.typ == EventDeviceRemoval {
			c.down()
		}
	}
}
