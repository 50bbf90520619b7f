package testutil

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// KernelRelease returns the running kernel's release ("6.1.0-56-amd64").
func KernelRelease(tb testing.TB) string {
	tb.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		tb.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

// KernelAtLeast reports whether the running kernel's version is at least
// major.minor.
func KernelAtLeast(tb testing.TB, major, minor int) bool {
	tb.Helper()
	r := KernelRelease(tb)
	var ma, mi int
	if _, err := fmt.Sscanf(r, "%d.%d", &ma, &mi); err != nil {
		tb.Fatalf("kernel release %q: %v", r, err)
	}
	return ma > major || ma == major && mi >= minor
}
