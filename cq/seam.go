package cq

import "github.com/goverbs/goverbs/internal/cqseam"

// The seam's functions (package cqseam) are set here, so that uverbs can
// make CQs and channels without cq exporting how.
func init() {
	cqseam.NewCQ = func(dev string, cfg any, create func(cqseam.Request) (any, error)) (any, error) {
		c, err := newCQ(dev, cfg.(Config), create)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	cqseam.NewChannel = func(fd int, dev string) (any, error) {
		ch, err := newChannel(fd, dev)
		if err != nil {
			return nil, err
		}
		return ch, nil
	}
	cqseam.Backend = func(q any) any {
		if c, ok := q.(*CQ); ok && c != nil {
			return c.be
		}
		return nil
	}
	cqseam.Exclusive = func(q any, f func()) {
		if c, ok := q.(*CQ); ok && c != nil {
			c.lock.Lock()
			defer c.lock.Unlock()
			if !c.closed.Load() { // else its ring is gone
				f()
			}
		}
	}
	cqseam.Closed = func(ch any) bool {
		c, ok := ch.(*Channel)
		return ok && c != nil && c.isClosed()
	}
	cqseam.Shut = func(obj any, release func()) {
		switch o := obj.(type) {
		case *CQ:
			if o != nil {
				o.shut(release)
			}
		case *Channel:
			if o != nil {
				o.shut(release == nil)
			}
		}
	}
}
