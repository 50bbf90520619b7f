package reliability

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uverbs"
)

// RLIMIT_MEMLOCK too low for an MR: registration fails with an error
// that wraps the kernel's errno (ENOMEM past the limit; with a limit of
// 0, EPERM on kernels that ask can_do_mlock) and says which limit and how to raise it. Root has
// CAP_IPC_LOCK, which lifts the limit, so the child drops it (from the
// one thread that registers: capabilities are per thread).
func TestMemlockLimit(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	c := testutil.StartRole(t, "memlock", nil)
	err := c.Wait()
	out := c.Output()
	t.Logf("child:\n%s", out)
	if err != nil || !strings.Contains(out, "ROLE OK") {
		t.Fatalf("child: %v", err)
	}
}

func childMemlock() error {
	runtime.LockOSThread() // the capability drop holds for this thread only
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if err := unix.Capget(&hdr, &caps[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	caps[0].Effective &^= 1 << unix.CAP_IPC_LOCK
	if err := unix.Capset(&hdr, &caps[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	c, err := uverbs.Open("rxe0")
	if err != nil {
		return err
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		return err
	}
	defer pd.Close()
	buf, err := uverbs.AllocBuffer(1 << 20)
	if err != nil {
		return err
	}
	defer buf.Close()
	mem := buf.Bytes()

	// want: the errnos the kernel may give (ib_umem_get: EPERM when
	// can_do_mlock() says no, on kernels that ask it, else ENOMEM).
	check := func(limit uint64, size int, want ...unix.Errno) error {
		_, err := pd.RegMR(mem[:size], uverbs.AccessLocalWrite)
		fmt.Printf("RLIMIT_MEMLOCK %d, %d-byte MR: %v\n", limit, size, err)
		wraps := false
		for _, e := range want {
			wraps = wraps || errors.Is(err, e)
		}
		switch {
		case err == nil:
			return fmt.Errorf("a %d-byte MR under a %d-byte RLIMIT_MEMLOCK registered", size, limit)
		case !wraps:
			return fmt.Errorf("error wraps none of %v: %w", want, err)
		case !strings.Contains(err.Error(), "RLIMIT_MEMLOCK") || !strings.Contains(err.Error(), "ulimit -l"):
			return fmt.Errorf("error names neither RLIMIT_MEMLOCK nor ulimit -l: %w", err)
		}
		return nil
	}
	setLimit := func(n uint64) error {
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: n, Max: n}); err != nil {
			return fmt.Errorf("setrlimit MEMLOCK %d: %w", n, err)
		}
		return nil
	}

	const limit = 64 << 10
	if err := setLimit(limit); err != nil {
		return err
	}
	// Under the limit: fine, which shows the limit is what refuses the rest.
	small, err := pd.RegMR(mem[:16<<10], uverbs.AccessLocalWrite)
	if err != nil {
		return fmt.Errorf("a 16 KiB MR under a 64 KiB limit: %w", err)
	}
	if err := check(limit, 1<<20, unix.ENOMEM); err != nil {
		return err
	}
	// 16 KiB pinned plus 64 KiB more passes the limit too: it is per process.
	if err := check(limit, 64<<10, unix.ENOMEM); err != nil {
		return err
	}
	if err := small.Close(); err != nil {
		return err
	}
	if err := setLimit(0); err != nil {
		return err
	}
	return check(0, 4096, unix.EPERM, unix.ENOMEM)
}
