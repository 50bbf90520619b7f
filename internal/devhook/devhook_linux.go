// Package devhook lets tests open a uverbs.Context on a device model: a
// transport.Kernel that answers the uverbs commands in place of the
// kernel, as the mlx5 device model does. Package uverbs sets Open when it
// is initialised; nothing outside tests calls it.
package devhook

import "github.com/goverbs/goverbs/internal/transport"

// Open opens a *uverbs.Context (returned as any, to avoid an import cycle)
// named name for the provider of driverID, whose commands go to k; fd is
// what the provider mmaps and what Context.Close closes.
var Open func(name string, driverID uint32, fd int, k transport.Kernel) (any, error)
