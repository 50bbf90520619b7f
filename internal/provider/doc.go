// Package provider is the seam between the public packages (uverbs, cq)
// and the providers (provider/rxe, provider/mlx5): the interfaces a
// provider implements. Everything provider-specific (driver data in and
// out of the kernel, mmap offsets, rings, doorbells) stays behind them,
// so uverbs and cq never learn a provider's layout.
//
// Each provider registers an unexported Driver for its driver id in its
// init (Register), as a database/sql driver does; uverbs imports every
// provider for that alone and picks one by the device's driver id
// (Lookup).
package provider
