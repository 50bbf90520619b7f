package cq

import "github.com/goverbs/goverbs/internal/cqhook"

func init() {
	cqhook.Exclusive = func(q any, f func()) {
		if c, ok := q.(*CQ); ok && c != nil {
			c.mu.Lock()
			defer c.mu.Unlock()
			f()
		}
	}
}
