// Package mlx5 will be the ConnectX (mlx5) provider: CQ and WQ ring
// layouts, doorbell records, UAR doorbells with explicit MMIO ordering,
// and the driver data of context, CQ and QP creation.
//
// It is empty so far.
package mlx5
