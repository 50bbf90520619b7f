//go:build mips || mips64 || ppc64 || s390x

package mlx5

// hostBigEndian says whether the CPU stores words big-endian, as the
// device reads its rings; see storeBE64.
const hostBigEndian = true
