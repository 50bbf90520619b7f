package transport

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
)

// WriteShort (rxe's send doorbell) may spend a while in the kernel: on 6.1
// rxe sends the packets inside that write. It must go through the
// runtime's syscall entry, so the scheduler hands the P to other
// goroutines meanwhile. Proven with GOMAXPROCS=1 and a write that blocks
// (a full pipe) until another goroutine of the same process drains it:
// through RawSyscall that goroutine never runs, and the child hangs.
func TestWriteShortReleasesP(t *testing.T) {
	p := testutil.StartRole(t, "writeshort", nil)
	out := make(chan error, 1)
	go func() { out <- p.Wait() }()
	select {
	case err := <-out:
		if err != nil {
			t.Fatalf("child: %v\n%s", err, p.Output())
		}
	case <-time.After(10 * time.Second):
		p.Kill()
		t.Fatal("a WriteShort blocked in the kernel kept the only P: no other goroutine ran for 10s (RawSyscall?)")
	}
}

var roles = testutil.Roles{"writeshort": func([]string) error { return writeShortChild() }}

func TestMain(m *testing.M) { roles.Main(m) }

// writeShortChild is the test's process: GOMAXPROCS 1, a WriteShort
// blocked in the kernel on a full pipe, and this goroutine draining the
// pipe, which it can do only if the writer gave up the P.
func writeShortChild() error {
	runtime.GOMAXPROCS(1)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return err
	}
	chunk := make([]byte, 4096)
	for { // fill the pipe
		if _, err := unix.Write(p[1], chunk); err != nil {
			break
		}
	}
	if err := unix.SetNonblock(p[1], false); err != nil {
		return err
	}
	c := NewConn(p[1], 0)
	done := make(chan error)
	go func() { done <- c.WriteShort(chunk[:64]) }()
	time.Sleep(100 * time.Millisecond) // the writer blocks in the kernel meanwhile
	for {
		if _, err := unix.Read(p[0], chunk); err != nil {
			break
		}
	}
	return <-done
}
