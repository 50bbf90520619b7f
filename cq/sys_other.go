//go:build !linux

package cq

import "github.com/goverbs/goverbs/internal/errs"

// Completion channels exist on Linux only: NewChannel fails with an
// error wrapping ErrNotSupported ("create comp channel rxe0: goverbs: RDMA
// verbs are not supported on darwin").

func setNonblock(int) error { return errs.ErrPlatform }

func closeFD(int) {}

func (ch *Channel) readEvents(int) { ch.readErr = errs.ErrPlatform }
