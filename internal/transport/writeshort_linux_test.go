package transport

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// WriteShort (rxe's send doorbell) may spend a while in the kernel: on 6.1
// rxe sends the packets inside that write. It must go through the
// runtime's syscall entry, so the scheduler hands the P to other
// goroutines meanwhile. Proven with GOMAXPROCS=1 and a write that blocks
// (a full pipe) until another goroutine of the same process drains it:
// through RawSyscall that goroutine never runs, and the child hangs.
func TestWriteShortReleasesP(t *testing.T) {
	if os.Getenv("GOVERBS_WRITESHORT_CHILD") == "1" {
		writeShortChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteShortReleasesP$", "-test.count=1")
	cmd.Env = append(os.Environ(), "GOVERBS_WRITESHORT_CHILD=1")
	out := make(chan error, 1)
	var buf []byte
	go func() {
		var err error
		buf, err = cmd.CombinedOutput()
		out <- err
	}()
	select {
	case err := <-out:
		if errors.Is(err, syscall.ENOEXEC) {
			// Under qemu-user (make unit32, bigendian) the binary is a
			// foreign one the kernel cannot start again; the host's own
			// run and the VMs test it.
			t.Skipf("cannot run this test binary again here: %v", err)
		}
		if err != nil {
			t.Fatalf("child: %v\n%s", err, buf)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-out
		t.Fatal("a WriteShort blocked in the kernel kept the only P: no other goroutine ran for 10s (RawSyscall?)")
	}
}

func writeShortChild() {
	runtime.GOMAXPROCS(1)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		panic(err)
	}
	chunk := make([]byte, 4096)
	for { // fill the pipe
		if _, err := unix.Write(p[1], chunk); err != nil {
			break
		}
	}
	if err := unix.SetNonblock(p[1], false); err != nil {
		panic(err)
	}
	c := NewConn(p[1], 0)
	done := make(chan error)
	go func() { done <- c.WriteShort(chunk[:64]) }()
	time.Sleep(100 * time.Millisecond) // the writer blocks in the kernel meanwhile
	// Drain: this runs only if the blocked writer gave up the P.
	for {
		if _, err := unix.Read(p[0], chunk); err != nil {
			break
		}
	}
	if err := <-done; err != nil {
		panic(err)
	}
}
