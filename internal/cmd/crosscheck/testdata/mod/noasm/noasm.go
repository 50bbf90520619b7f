// Package noasm declares a function that nothing defines.
package noasm

func Missing()
