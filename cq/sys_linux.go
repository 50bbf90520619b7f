package cq

import "golang.org/x/sys/unix"

func setNonblock(fd int, on bool) error { return unix.SetNonblock(fd, on) }

func closeFD(fd int) { unix.Close(fd) }
