package cq

import "github.com/goverbs/goverbs/internal/cqhook"

func init() {
	cqhook.Exclusive = func(q any, f func()) {
		if c, ok := q.(*CQ); ok && c != nil {
			c.lock.mu.Lock()
			defer c.lock.mu.Unlock()
			f()
		}
	}
	cqhook.Closed = func(ch any) bool {
		c, ok := ch.(*Channel)
		return ok && c != nil && c.isClosed()
	}
	cqhook.Shut = func(obj any, release func()) {
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
