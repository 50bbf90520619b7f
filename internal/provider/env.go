package provider

// EnvMLX5UAR names the environment variable that picks the UARs an mlx5
// context asks for: "dynamic", "static", or unset for dynamic where the
// kernel grants them (provider/mlx5's package doc). The hardware checklist
// (internal/cmd/hwcheck) sets it to prove both kinds on one kernel.
const EnvMLX5UAR = "GOVERBS_MLX5_UAR"
