// Package provider is the seam between the public packages (uverbs, cq)
// and the providers (provider/rxe, provider/mlx5): the interfaces a
// provider implements. Everything provider-specific (driver data in and
// out of the kernel, mmap offsets, rings, doorbells) stays behind them,
// so uverbs and cq never learn a provider's layout.
//
// uverbs picks the provider by the device's driver id, from a table that
// imports each provider directly: no registration, no blank imports.
package provider
