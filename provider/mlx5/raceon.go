//go:build race

package mlx5

// raceBuild is true under the race detector: see sendQueue.pub.
const raceBuild = true
