package cq

import "github.com/goverbs/goverbs/internal/cqseam"

// backend is the kernel and provider side of one CQ: see cqseam.Backend.
type backend = cqseam.Backend[WC]

// The seam's hooks (package cqseam), so that uverbs can make CQs and
// channels without cq exporting how.
func init() {
	cqseam.Register(cqseam.Hooks[*CQ, *Channel, Config, WC]{
		NewCQ:      newCQ,
		NewChannel: newChannel,
		Backend:    func(q *CQ) backend { return q.be },
		Exclusive: func(q *CQ, f func()) {
			q.lock.Lock()
			defer q.lock.Unlock()
			if !q.closed.Load() { // else its ring is gone
				f()
			}
		},
		ShutCQ:      (*CQ).shut,
		ShutChannel: (*Channel).shut,
		Closed:      (*Channel).isClosed,
	})
}
