//go:build !linux

package cq

func setNonblock(int, bool) error { return ErrNotSupported }

func closeFD(int) {}

func (ch *Channel) readAll(int) { ch.readErr = ErrNotSupported }
