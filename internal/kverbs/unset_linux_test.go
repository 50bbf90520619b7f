package kverbs

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// A kernel that answers a command but leaves a mandatory output unset
// (no UVERBS_ATTR_F_VALID_OUTPUT) gives an error wrapping EIO, not a
// panic (issue 36: transport.As panicked on the nil region).
func TestOutputLeftUnset(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(c *transport.Conn) error
	}{
		{"destroy qp", func(c *transport.Conn) error { _, err := DestroyQP(c, 1); return err }},
		{"destroy cq", func(c *transport.Conn) error { _, err := DestroyCQ(c, 1); return err }},
		{"query port", func(c *transport.Conn) error { _, err := QueryPort(c, 1); return err }},
		{"query gid entry", func(c *transport.Conn) error { _, err := QueryGIDEntry(c, 1, 0); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// ioctlRecorder answers every ioctl with success and writes nothing back.
			c := transport.NewKernelConn(-1, uapi.RDMA_DRIVER_RXE, &ioctlRecorder{})
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = tc.call(c)
			}()
			if !errors.Is(err, unix.EIO) {
				t.Fatalf("err = %v, want one wrapping EIO", err)
			}
		})
	}
}
