package bench

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// benchUnshare is an experiment switch (make bench
// VMFLAGS=-env=GOVERBS_BENCH_UNSHARE=1), not a figure of the tables: it
// gives the goroutine of BenchmarkReqNotify and BenchmarkPostPoll a
// thread of its own with a file table of its own before the loop.
//
// Why: in a process whose file table is shared by several threads (every
// Go program), the kernel takes and drops a reference on the file at
// each system call on it; a single-threaded C process is spared that. A
// thread with a private table (unshare(CLONE_FILES)) is spared it too.
// Counted under -qemuicount on 6.1: 38 instructions a system call
// (ReqNotify 2,424 -> 2,386 against rdma-core's 2,378; PostPoll 14,650
// -> 14,620). The tools do not do it (docs/PERFORMANCE-LOG.md says why).
//
// The thread is never unlocked: a thread whose file table is private
// must end with its goroutine. A descriptor closed on that thread
// (by the benchmark's cleanup, if it runs there) stays open in the
// process's table until the test binary ends.
var benchUnshare = os.Getenv("GOVERBS_BENCH_UNSHARE") == "1"

// maybeUnshare does it when benchUnshare is set.
func maybeUnshare(b *testing.B) {
	if !benchUnshare {
		return
	}
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_FILES); err != nil {
		b.Fatal(err)
	}
}
