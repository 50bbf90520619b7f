package cq

import (
	"context"
	"errors"
	"os"
	"testing"
)

// Methods on a nil *CQ or *Channel return an error wrapping
// os.ErrInvalid instead of panicking, as os.(*File) methods on a nil
// *File do.
func TestNilReceivers(t *testing.T) {
	var c *CQ
	var ch *Channel
	for name, f := range map[string]func() error{
		"CQ.Ack":       func() error { return c.Ack(1) },
		"CQ.ReqNotify": func() error { return c.ReqNotify(NextCompletion) },
		"CQ.Resize":    func() error { return c.Resize(4) },
		"CQ.Close":     func() error { return c.Close() },
		"Channel.Wait": func() error { _, err := ch.Wait(context.Background()); return err },
		"Channel.TryWait": func() error {
			_, ok, err := ch.TryWait()
			if ok {
				t.Error("TryWait on a nil Channel found an event")
			}
			return err
		},
		"Channel.Close": func() error { return ch.Close() },
		"Channel.Serve": func() error {
			return ch.Serve(context.Background(), nil, nil, func(*CQ, []WC) error { return nil })
		},
	} {
		t.Run(name, func(t *testing.T) {
			var op *OpError
			if err := f(); !errors.Is(err, os.ErrInvalid) || !errors.As(err, &op) {
				t.Errorf("%s on nil: %v, want an *OpError wrapping os.ErrInvalid", name, err)
			}
		})
	}
	if n := c.Unacked(); n != 0 {
		t.Errorf("Unacked on a nil CQ = %d, want 0", n)
	}
	if fd := ch.FD(); fd != -1 {
		t.Errorf("FD of a nil Channel = %d, want -1", fd)
	}
}
