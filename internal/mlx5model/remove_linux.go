package mlx5model

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// Device removal under open contexts, as the kernel does it for a
// hardware driver. mlx5_ib has disassociate_ucontext, so unregistering the
// device (a PCI remove, a driver unbind, a firmware reset that reloads
// it) does not wait for the applications: ib_uverbs_remove_one calls
// ib_uverbs_free_hw_resources, which blocks new commands
// (uverbs_disassociate_api_pre, waiting for those under way) and tears
// every open context down with uverbs_destroy_ufile_hw(file,
// RDMA_REMOVE_DRIVER_REMOVE) while the fds stay open.

// Remove removes the device as the kernel removes a hardware device whose
// driver disassociates (Linux 6.1, mlx5_ib): every context open on it is
// torn down at once, with its fds still open. Then, for each context:
//
//   - Every object (PD, MR, AH, CQ, QP, UAR) is destroyed: the HCA touches
//     none of their memory again, no completion and no event comes. The
//     handles stay, as the kernel's uobjects do: a later destroy of a core
//     object (PD, MR, AH, CQ, QP) succeeds, and a CQ's or QP's reports the
//     events the application had read before the removal (the queued ones
//     were dropped, uncounted: ib_uverbs_release_ucq, _release_uevent). The
//     UAR object's destroy, a driver method, fails with EIO (its handler is
//     gone: uverbs_disassociate_api_pre).
//   - Every other command fails with EIO (rdma_lookup_get_uobject and
//     ib_uverbs_get_ucontext_file, with ib_dev gone).
//   - The UAR pages the application mapped are zapped: their next access
//     finds a fresh zero page (rdma_umap_fault's disassociate_page), and
//     the doorbells written there reach nothing.
//   - Each completion channel is closed from the kernel's side
//     (ib_uverbs_free_event_queue): its queued events are dropped, a
//     waiter parked on it wakes, and every read fails with EIO.
//   - The async fd gets DEVICE_FATAL (uverbs_async_event_destroy_uobj);
//     queued events about objects are dropped, those about the device and
//     its ports stay before it. The fd stays open with nothing more to
//     read: DEVICE_FATAL is the end of its stream.
//
// NewContext fails with ENODEV from then on.
//
// Where the model differs from the kernel: a pipe cannot be made to fail
// reads with EIO, so the application's completion channel fd is replaced
// (dup3) by an fd of /proc/self/mem positioned at address 0, whose every
// read fails with EIO as the kernel's channel does. The runtime's poller
// still watches the old pipe; closing its write end wakes a parked waiter
// with EPOLLHUP, where the kernel's channel polls EPOLLERR (which Go's
// poller turns into "not pollable" for every later wait, a path
// cq.TestWaitOnFailedFD covers). The zero page is the memfd's own,
// refaulted after a hole punch, one per page, where the kernel maps one
// shared page. Remove must not run concurrently with the application
// closing its channels or contexts: the model checks that each fd number
// is still the one it gave out just before it replaces or punches it.
func (d *Device) Remove() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("mlx5model: remove: device closed")
	}
	if d.removed {
		return nil
	}
	d.removed = true
	var errs []error
	for _, c := range d.ctxs {
		if err := c.disassociate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// tomb is what a handle holds after the removal: the object is gone, its
// destroy still to be answered.
type tomb struct {
	object      uint16 // UVERBS_OBJECT_* or MLX5_IB_OBJECT_UAR
	comp, async uint32 // a CQ's or QP's events the application read
}

// disassociate is uverbs_destroy_ufile_hw(RDMA_REMOVE_DRIVER_REMOVE) for
// one context, and the zapping of its mappings; d.mu is held.
func (c *Context) disassociate() error {
	if c.released || c.removed {
		return nil
	}
	c.removed = true
	d := c.d
	var errs []error
	// The objects, counted first: the mirrors still know what is unread.
	tombs := make(map[uint32]any, len(c.handles))
	for h, o := range c.handles {
		t := &tomb{}
		switch o := o.(type) {
		case *pd:
			t.object = uapi.UVERBS_OBJECT_PD
		case *mr:
			t.object = uapi.UVERBS_OBJECT_MR
			if o.win != nil {
				t.object = uapi.UVERBS_OBJECT_MW
			}
			delete(d.mrs, o.key)
		case *ah:
			t.object = uapi.UVERBS_OBJECT_AH
		case *cq:
			t.object = uapi.UVERBS_OBJECT_CQ
			k := eventKey{0, o.user}
			t.comp, t.async = o.fired, o.asyncs
			if o.ch != nil {
				t.comp -= uint32(o.ch.unread(k))
			}
			if c.async != nil {
				t.async -= uint32(c.async.unread(k))
			}
			o.dead, o.buf, o.db = true, nil, nil
			delete(d.cqs, o.cqn)
		case *qp:
			t.object = uapi.UVERBS_OBJECT_QP
			t.async = o.asyncs
			if c.async != nil {
				t.async -= uint32(c.async.unread(eventKey{1, o.user}))
			}
			o.dead, o.buf, o.sq, o.db = true, nil, nil, nil
			delete(d.qps, o.qpn)
		case *srq:
			t.object = uapi.UVERBS_OBJECT_SRQ
			t.async = o.asyncs
			if c.async != nil {
				t.async -= uint32(c.async.unread(eventKey{3, o.user}))
			}
			o.dead, o.buf, o.db = true, nil, nil
		case *uar:
			t.object = uapi.MLX5_IB_OBJECT_UAR
		}
		tombs[h] = t
	}
	c.handles = tombs
	clear(c.uidxs)

	// The UAR pages: the model lets go of its view, and the application's
	// mappings of the fd lose their pages (a hole punched in a memfd
	// zaps them from every mapping; the next access faults in a zero page).
	for _, u := range c.uars {
		u.unmap()
	}
	c.uars, c.static = nil, nil
	if c.fdAlive() {
		var st unix.Stat_t
		err := unix.Fstat(c.fd, &st)
		if err == nil {
			err = unix.Fallocate(c.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, st.Size)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("mlx5model: remove: zap the UAR pages: %w", err))
		}
	}

	for _, p := range c.channels {
		if err := p.fail(); err != nil {
			errs = append(errs, fmt.Errorf("mlx5model: remove: completion channel fd %d: %w", p.r, err))
		}
	}
	if c.async != nil {
		if err := c.async.endWithFatal(); err != nil {
			errs = append(errs, fmt.Errorf("mlx5model: remove: async fd %d: %w", c.async.r, err))
		}
	}
	return errors.Join(errs...)
}

// afterRemoval answers a command on a disassociated context: the destroy
// of a core object succeeds (with the counts of events read), everything
// else fails with EIO. d.mu is held.
func (c *Context) afterRemoval(a *args) unix.Errno {
	h := (*uapi.IBUverbsIoctlHdr)(a.hdr)
	switch key(h.ObjectID, h.MethodID) {
	case key(uapi.UVERBS_OBJECT_PD, uapi.UVERBS_METHOD_PD_DESTROY):
		_, e := c.bury(a.val(uapi.UVERBS_ATTR_DESTROY_PD_HANDLE), uapi.UVERBS_OBJECT_PD)
		return e
	case key(uapi.UVERBS_OBJECT_MR, uapi.UVERBS_METHOD_MR_DESTROY):
		_, e := c.bury(a.val(uapi.UVERBS_ATTR_DESTROY_MR_HANDLE), uapi.UVERBS_OBJECT_MR)
		return e
	case key(uapi.UVERBS_OBJECT_MW, uapi.UVERBS_METHOD_MW_DESTROY):
		_, e := c.bury(a.val(uapi.UVERBS_ATTR_DESTROY_MW_HANDLE), uapi.UVERBS_OBJECT_MW)
		return e
	case key(uapi.UVERBS_OBJECT_AH, uapi.UVERBS_METHOD_AH_DESTROY):
		_, e := c.bury(a.val(uapi.UVERBS_ATTR_DESTROY_AH_HANDLE), uapi.UVERBS_OBJECT_AH)
		return e
	case key(uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY):
		t, e := c.bury(a.val(uapi.UVERBS_ATTR_DESTROY_CQ_HANDLE), uapi.UVERBS_OBJECT_CQ)
		if e == 0 {
			r := uapi.IBUverbsDestroyCQResp{CompEventsReported: t.comp, AsyncEventsReported: t.async}
			a.out(uapi.UVERBS_ATTR_DESTROY_CQ_RESP, structBytes(&r))
		}
		return e
	case key(uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY):
		t, e := c.bury(a.val(uapi.UVERBS_ATTR_DESTROY_QP_HANDLE), uapi.UVERBS_OBJECT_QP)
		if e == 0 {
			a.out(uapi.UVERBS_ATTR_DESTROY_QP_RESP, u32b(t.async))
		}
		return e
	case key(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_DESTROY):
		t, e := c.bury(a.val(uapi.UVERBS_ATTR_DESTROY_SRQ_HANDLE), uapi.UVERBS_OBJECT_SRQ)
		if e == 0 {
			r := uapi.IBUverbsDestroySRQResp{EventsReported: t.async}
			a.out(uapi.UVERBS_ATTR_DESTROY_SRQ_RESP, structBytes(&r))
		}
		return e
	case key(uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INVOKE_WRITE):
		if _, ok := removedWriteCmds[uint32(a.val(uapi.UVERBS_ATTR_WRITE_CMD))]; ok {
			return runWrite(a, removedWriteCmds)
		}
	}
	return unix.EIO
}

// removedWriteCmds are the write commands a disassociated context still
// answers: the destroys of core objects.
var removedWriteCmds = map[uint32]writeCmd{
	uapi.IB_USER_VERBS_CMD_DEALLOC_PD: {4, 0, func(w *wargs) unix.Errno {
		_, e := w.c.bury(uint64(ne32(w.in)), uapi.UVERBS_OBJECT_PD)
		return e
	}},
	uapi.IB_USER_VERBS_CMD_DEREG_MR: {4, 0, func(w *wargs) unix.Errno {
		_, e := w.c.bury(uint64(ne32(w.in)), uapi.UVERBS_OBJECT_MR)
		return e
	}},
	uapi.IB_USER_VERBS_CMD_DEALLOC_MW: {4, 0, func(w *wargs) unix.Errno {
		_, e := w.c.bury(uint64(ne32(w.in)), uapi.UVERBS_OBJECT_MW)
		return e
	}},
	uapi.IB_USER_VERBS_CMD_DESTROY_AH: {4, 0, func(w *wargs) unix.Errno {
		_, e := w.c.bury(uint64(ne32(w.in)), uapi.UVERBS_OBJECT_AH)
		return e
	}},
	uapi.IB_USER_VERBS_CMD_DESTROY_CQ: {int(unsafe.Sizeof(uapi.IBUverbsDestroyCQ{})), int(unsafe.Sizeof(uapi.IBUverbsDestroyCQResp{})), func(w *wargs) unix.Errno {
		t, e := w.c.bury(uint64(view[uapi.IBUverbsDestroyCQ](w.in).CQHandle), uapi.UVERBS_OBJECT_CQ)
		if e == 0 {
			r := uapi.IBUverbsDestroyCQResp{CompEventsReported: t.comp, AsyncEventsReported: t.async}
			w.respond(structBytes(&r))
		}
		return e
	}},
	uapi.IB_USER_VERBS_CMD_DESTROY_QP: {int(unsafe.Sizeof(uapi.IBUverbsDestroyQP{})), int(unsafe.Sizeof(uapi.IBUverbsDestroyQPResp{})), func(w *wargs) unix.Errno {
		t, e := w.c.bury(uint64(view[uapi.IBUverbsDestroyQP](w.in).QPHandle), uapi.UVERBS_OBJECT_QP)
		if e == 0 {
			w.respond(u32b(t.async))
		}
		return e
	}},
	uapi.IB_USER_VERBS_CMD_DESTROY_SRQ: {int(unsafe.Sizeof(uapi.IBUverbsDestroySRQ{})), int(unsafe.Sizeof(uapi.IBUverbsDestroySRQResp{})), func(w *wargs) unix.Errno {
		t, e := w.c.bury(uint64(view[uapi.IBUverbsDestroySRQ](w.in).SRQHandle), uapi.UVERBS_OBJECT_SRQ)
		if e == 0 {
			w.respond(u32b(t.async))
		}
		return e
	}},
}

// bury answers the destroy of handle h, an object of kind object, after
// the removal: it forgets the handle and returns its tomb.
func (c *Context) bury(h uint64, object uint16) (*tomb, unix.Errno) {
	if h > 0xffffffff {
		return nil, unix.EINVAL
	}
	t, ok := c.handles[uint32(h)].(*tomb)
	if !ok || t.object != object {
		return nil, unix.EINVAL
	}
	delete(c.handles, uint32(h))
	return t, 0
}

// drain takes every whole event queued in p, through a dup of the read
// end the application holds, which it returns open (-1 when the
// application no longer holds it). The mirror is emptied.
func (p *eventPipe) drain() (keep int, queued []byte, err error) {
	p.queue = p.queue[:0]
	if !p.alive() {
		return -1, nil, nil
	}
	keep, err = unix.FcntlInt(uintptr(p.r), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	// The dup shares the application's file status flags: read it
	// non-blocking, then put them back.
	fl, err := unix.FcntlInt(uintptr(keep), unix.F_GETFL, 0)
	if err == nil && fl&unix.O_NONBLOCK == 0 {
		if _, err = unix.FcntlInt(uintptr(keep), unix.F_SETFL, fl|unix.O_NONBLOCK); err == nil {
			defer unix.FcntlInt(uintptr(keep), unix.F_SETFL, fl)
		}
	}
	if err != nil {
		unix.Close(keep)
		return -1, nil, err
	}
	buf := make([]byte, 64*p.size)
	for {
		n, err := unix.Read(keep, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break // EAGAIN: nothing left
		}
		queued = append(queued, buf[:n]...)
	}
	return keep, queued[:len(queued)/p.size*p.size], nil
}

// fail closes a completion channel from the kernel's side: its queued
// events dropped, every read failing with EIO, a parked waiter woken.
func (p *eventPipe) fail() error {
	keep, _, err := p.drain()
	if keep < 0 {
		p.close()
		return err
	}
	// The replacement: /proc/self/mem at offset 0 reads address 0, never
	// mapped in a Go process, so every read(2) fails with EIO.
	eio, err := unix.Open("/proc/self/mem", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		if fdIno(p.r) == p.ino { // still the application's channel
			err = unix.Dup3(eio, p.r, unix.O_CLOEXEC)
		}
		unix.Close(eio)
	}
	// The last writer goes: the old pipe, which the runtime's poller
	// still watches through keep, polls EPOLLHUP and wakes a parked
	// waiter, which then reads the replacement. (If the replacement
	// failed, that reader sees end of file instead.)
	p.close()
	p.keep = keep // held until the context is released: the poller's registration lives on it
	return err
}

// endWithFatal queues DEVICE_FATAL on the async fd, after dropping the
// queued events about objects (their uobjects are destroyed); the fd
// stays open.
func (p *eventPipe) endWithFatal() error {
	keep, queued, err := p.drain()
	if keep >= 0 {
		unix.Close(keep)
	}
	if err != nil {
		return err
	}
	for off := 0; off+p.size <= len(queued); off += p.size {
		ev := view[uapi.IBUverbsAsyncEventDesc](queued[off : off+p.size])
		if !objectEvent(ev.EventType) {
			p.post(queued[off:off+p.size], eventKey{2, ev.Element})
		}
	}
	fatal := uapi.IBUverbsAsyncEventDesc{Element: 0, EventType: ibEventDeviceFatal}
	if !p.post(structBytes(&fatal), eventKey{2, 0}) && p.alive() {
		return errors.New("DEVICE_FATAL not queued")
	}
	return nil
}

// ibEventDeviceFatal is IB_EVENT_DEVICE_FATAL (enum ib_event_type).
const ibEventDeviceFatal = 8

// objectEvent reports whether an async event type (enum ib_event_type)
// is about a CQ, QP, SRQ or WQ rather than the device or a port.
func objectEvent(typ uint32) bool {
	switch typ {
	case 0, // CQ_ERR
		1, 2, 3, 4, 5, 6, 7, // QP_FATAL … PATH_MIG_ERR
		14, 15, 16, // SRQ_ERR, SRQ_LIMIT_REACHED, QP_LAST_WQE_REACHED
		19: // WQ_FATAL
		return true
	}
	return false
}
