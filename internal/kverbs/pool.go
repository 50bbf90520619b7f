package kverbs

import (
	"sync"

	"github.com/goverbs/goverbs/internal/transport"
)

// cmds recycles commands for the control path; data-path callers keep
// their own Cmd.
var cmds = sync.Pool{New: func() any { return new(transport.Cmd) }}

func getCmd() *transport.Cmd  { return cmds.Get().(*transport.Cmd) }
func putCmd(c *transport.Cmd) { cmds.Put(c) }

// ioctlUHW adds the driver's input and room for its output to an ioctl
// command; the handle is -1 without an output (cmd.Output then gives nil).
func ioctlUHW(cmd *transport.Cmd, in []byte, outLen int) transport.Handle {
	if len(in) > 0 {
		copy(cmd.UHWIn(len(in)), in)
	}
	if outLen > 0 {
		return cmd.UHWOut(outLen)
	}
	return -1
}

// writeUHW adds the driver's input and room for its output to a write
// command; the returned region holds the output after Invoke.
func writeUHW(cmd *transport.Cmd, in []byte, outLen int) []byte {
	if len(in) > 0 {
		copy(cmd.WriteUHWIn(len(in)), in)
	}
	if outLen > 0 {
		return cmd.WriteUHWOut(outLen)
	}
	return nil
}
