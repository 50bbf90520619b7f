package cq

// The arm rule of mlx5 (issue #36).
//
// An mlx5 arm word carries a 2-bit sequence number (rdma-core's arm_sn,
// bits 28-29), which counts the events the device raised for the CQ; the
// device ignores an arm whose number predates an event it raised
// (internal/mlx5model ignores one that is not the count, mod 4). The
// kernel's own CQs advance arm_sn in the completion interrupt
// (mlx5_eq_comp_int), but a user CQ's event reaches user space only
// through its channel, so rdma-core advances arm_sn when
// ibv_get_cq_event reads it (mlx5_cq_event), as the provider's
// EventRead does. An arm made after the event fired and before it was
// read therefore carries the old number, and is lost: no event comes for
// the next completion, where the one-shot rule (arm again after an
// event, and the next completion raises another) wants one.
//
// readFirst keeps the rule for the caller: an arm of a CQ that was armed
// with no event of it read since first reads what the channel holds, as
// ibv_get_cq_event would, counts the CQ's own events as read (EventRead),
// and leaves every event queued for Wait and TryWait, which deliver them
// as usual; then it arms, with the number the device expects. The usual
// loop (arm, wait, arm) never reads ahead: the event was read before the
// arm.

// armer is what ReqNotify and event delivery call: the backend itself, or
// a readFirst around it.
type armer interface {
	ReqNotify(solicitedOnly bool) error
	EventRead()
}

// readFirst arms the CQ of a backend whose arms need its events read
// first (Backend.ArmNeedsEventsRead). Its fields are guarded by the CQ's
// lock, under which ReqNotify and EventRead run.
type readFirst struct {
	be backend
	c  *CQ
	// armed: an arm went to the device, and no event of the CQ has been
	// counted since. An arm in that state reads ahead first.
	armed bool
	// early counts the CQ's events that a read-ahead counted (EventRead)
	// and left queued in the channel's pending buffer: their delivery
	// must not count them again. Never more than the CQ's events
	// pending, so none is delivered without passing through the buffer.
	early int
	// again is the arm to make when the CQ's next event is counted: 0
	// for none, else 1 + its Notify (NextCompletion wins). It is set
	// by an arm that could not read ahead, because a Wait or TryWait was
	// reading the channel: the CQ's event may be in its hands.
	again uint8
}

// ReqNotify reads ahead when the CQ may have an event raised and not
// read, then arms.
func (r *readFirst) ReqNotify(solicitedOnly bool) error {
	if r.armed {
		r.readAhead(solicitedOnly)
	}
	err := r.be.ReqNotify(solicitedOnly)
	if err == nil {
		r.armed = true
	}
	return err
}

// readAhead counts the CQ's events that the channel holds, in its fd or
// in its pending buffer, and that nothing has counted yet.
//
//go:noinline
func (r *readFirst) readAhead(solicitedOnly bool) {
	n, full, ok := r.c.cfg.Channel.readAhead(r.c.user)
	if !ok || full && n == r.early {
		// A Wait or TryWait is reading the channel, or the pending
		// buffer is full and the fd may hold more: the CQ's event may
		// come through it. The arm still goes to the device now, where it
		// counts if no event fired since the last; and when the reader
		// delivers the CQ's next event, EventRead arms once more.
		want := uint8(1 + NextCompletion)
		if solicitedOnly {
			want = 1 + uint8(NextSolicited)
		}
		if r.again == 0 || want < r.again {
			r.again = want
		}
		return
	}
	r.again = 0
	for ; r.early < n; r.early++ {
		r.be.EventRead()
		r.armed = false
	}
}

// EventRead is told of an event delivered for the CQ: it counts it,
// unless a read-ahead did, and makes the arm a read-ahead left to it.
func (r *readFirst) EventRead() {
	if r.early > 0 {
		r.early--
		return
	}
	r.armed = false
	r.be.EventRead()
	if r.again != 0 {
		sol := Notify(r.again-1) == NextSolicited
		r.again = 0
		if r.be.ReqNotify(sol) == nil { // an error (the CQ or its context broke) shows at the next call
			r.armed = true
		}
	}
}

// readAhead moves the events queued in the channel's fd into its pending
// buffer, without blocking, for Wait and TryWait to deliver, and returns
// how many pending events name the CQ of handle h, and whether the buffer
// is full (the fd may hold more). ok is false, and nothing read, when a
// Wait or TryWait holds the turn to read. The caller holds h's CQ's lock,
// so nothing here may wait on a CQ lock or for the turn: a Wait that
// holds the turn may be parked, or be waiting for that lock to deliver an
// event.
func (ch *Channel) readAhead(h uint64) (n int, full, ok bool) {
	// ahead serialises read-aheads, and lets a TryWait that finds the
	// turn taken wait for a read-ahead (which never blocks), though not
	// for a Wait: it is held whenever a read-ahead holds the turn.
	ch.ahead.Lock()
	defer ch.ahead.Unlock()
	if !ch.rd.TryLock() {
		return 0, false, false
	}
	defer ch.rd.Unlock()
	if !ch.isClosed() { // else Close may have closed the fd; nothing is delivered any more
		ch.readEvents(len(ch.pending))
		ch.readErr = nil // a failing fd fails the next Wait's read too
	}
	for i := 0; i < ch.n; i++ {
		if ch.pending[(ch.head+i)&(len(ch.pending)-1)] == h {
			n++
		}
	}
	return n, ch.n == len(ch.pending), true
}
