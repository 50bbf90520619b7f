package cq

import (
	"context"
	"fmt"
	"syscall"
)

// ServeOptions are the options of [Channel.Serve]; the zero value (or
// nil) is the usual choice.
type ServeOptions struct {
	// Notify is what each CQ is armed for: NextCompletion (the zero
	// value) or NextSolicited.
	Notify Notify
	// Batch is how many completions fn gets at most at once; 0 means 16.
	Batch int
}

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
// completions, in a slice valid until it returns. Serve allocates when
// it starts, never per event.
//
// A CQ of ch that is not in cqs may still raise events; Serve
// acknowledges and ignores them.
func (ch *Channel) Serve(ctx context.Context, cqs []*CQ, opts *ServeOptions, fn func(c *CQ, wcs []WC) error) error {
	if ch == nil {
		return nilErr("serve cq events")
	}
	const op = "serve cq events"
	var o ServeOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Batch < 0:
		return &OpError{Op: op, Device: ch.dev, Err: fmt.Errorf("batch %d: %w", o.Batch, syscall.EINVAL)}
	case o.Notify > NextSolicited:
		return &OpError{Op: op, Device: ch.dev, Err: fmt.Errorf("notify %d: %w", o.Notify, syscall.EINVAL)}
	case o.Batch == 0:
		o.Batch = 16
	}
	wcs := make([]WC, o.Batch)
	mine := make(map[*CQ]bool, len(cqs))
	for _, c := range cqs {
		if c.Channel() != ch {
			return &OpError{Op: op, Device: ch.dev, Err: fmt.Errorf("a CQ not attached to this channel: %w", syscall.EINVAL)}
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
		if err := c.ReqNotify(o.Notify); err != nil {
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
		if err := c.ReqNotify(o.Notify); err != nil {
			return err
		}
		if err := drain(c); err != nil {
			return err
		}
	}
}
