//go:build linux

package uverbs

import "github.com/goverbs/goverbs/internal/transport"

// SetTestConnHook makes every Open run hook on its transport; nil clears it.
func SetTestConnHook(hook func(*transport.Conn)) { testConnHook = hook }
