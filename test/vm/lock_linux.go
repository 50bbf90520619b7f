package main

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockVMs takes the machine-wide VM lock in the cache directory, so that
// two harness runs (two developers, or a developer and CI) never boot
// VMs at once on a small machine. It waits for the lock; unlock releases it.
func lockVMs(cache string) (unlock func(), err error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(cache, "vm.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		logf("waiting for another harness run to finish its VMs (%s)", f.Name())
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
	}
	return func() { f.Close() }, nil
}
