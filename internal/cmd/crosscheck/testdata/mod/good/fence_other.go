//go:build !amd64 && !arm64

package good

func Fence() {}
