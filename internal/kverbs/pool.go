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
