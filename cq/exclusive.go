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
}
