//go:build !linux

package mutex

// Fenced reports whether a waiter can fence the unlockers: not without
// membarrier(2).
func Fenced() bool { return false }

func barrier() bool { return false }
