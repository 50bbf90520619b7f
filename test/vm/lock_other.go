//go:build !linux

package main

func lockVMs(string) (func(), error) { return func() {}, nil }
