//go:build !linux

package cq

import "github.com/goverbs/goverbs/internal/errs"

// Completion channels exist on Linux only: NewChannel fails with an
// error wrapping ErrNotSupported ("create comp channel rxe0: goverbs: RDMA
// verbs are not supported on darwin").

func setNonblockFresh(int) error { return errs.ErrPlatform }

func closeFD(int) {}

func (ch *Channel) readEvents(int) { ch.readErr = errs.ErrPlatform }

func (ch *Channel) readOne() (uint64, bool) { ch.readErr = errs.ErrPlatform; return 0, false }

func newEpoll() (int, error) { return -1, errs.ErrPlatform }

func epollWatch(int, int, bool) error { return errs.ErrPlatform }
