// Package badasm's assembly does not assemble.
package badasm

func Fence()
