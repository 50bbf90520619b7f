package cq

import (
	"context"
	"fmt"
	"syscall"
)

// Serve runs the completion event loop that cannot lose a completion, for
// cqs, which must all be attached to ch, until ctx ends or fn returns an
// error, which Serve then returns.
//
// It arms each CQ and then polls it until it is empty, so that a
// completion that arrived before the arm is found by the poll and one
// that arrives after it raises an event. Then, for each event: it
// acknowledges it, re-arms the CQ the event names, and polls that CQ
// until empty again. An event whose CQ is already empty (its completion
// was taken by the previous drain) is harmless. fn gets each batch of
// completions, in wcs (whose length sets the batch size), valid until it
// returns.
//
// A CQ of ch that is not in cqs may still raise events; Serve
// acknowledges and ignores them.
func (ch *Channel) Serve(ctx context.Context, cqs []*CQ, solicitedOnly bool, wcs []WC, fn func(c *CQ, wcs []WC) error) error {
	if len(wcs) == 0 {
		return &OpError{Op: "serve cq events", Device: ch.dev, Err: fmt.Errorf("no room for completions: %w", syscall.EINVAL)}
	}
	mine := make(map[*CQ]bool, len(cqs))
	for _, c := range cqs {
		if c.Channel() != ch {
			return &OpError{Op: "serve cq events", Device: ch.dev, Err: fmt.Errorf("a CQ not attached to this channel: %w", syscall.EINVAL)}
		}
		mine[c] = true
	}
	drain := func(c *CQ) error {
		for {
			n, err := c.Poll(wcs)
			if err != nil || n == 0 {
				return err
			}
			if err := fn(c, wcs[:n]); err != nil {
				return err
			}
		}
	}
	for _, c := range cqs {
		if err := c.ReqNotify(solicitedOnly); err != nil {
			return err
		}
		if err := drain(c); err != nil {
			return err
		}
	}
	for {
		c, err := ch.Wait(ctx)
		if err != nil {
			return err
		}
		c.Ack(1)
		if !mine[c] {
			continue
		}
		if err := c.ReqNotify(solicitedOnly); err != nil {
			return err
		}
		if err := drain(c); err != nil {
			return err
		}
	}
}
