package uverbs_test

import (
	"bytes"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// libibverbs needs ibv_fork_init before a process with registered memory
// forks, or the parent's writes after the fork can land in copies the
// device never sees. goverbs has no such call: Go starts children with
// clone(CLONE_VM|CLONE_VFORK), which copies no page; AllocBuffer memory is
// MADV_DONTFORK; and the kernels goverbs supports copy pinned pages into
// the child at fork time (the netlink attribute libibverbs reads to answer
// IBV_FORK_UNNEEDED). This test holds all three: a process with live QPs
// and MRs, Go-heap and AllocBuffer, starts children with os/exec and
// syscall.ForkExec and forks for real, and RDMA traffic before, during and
// after lands in the memory the parent sees, whatever the child writes.
func TestForkSafety(t *testing.T) {
	e := newQPEnv(t) // skips on a host without rxe0; fails in the VM
	sys, err := netlink.QueryRDMASystem()
	if err != nil {
		t.Fatal(err)
	}
	if !sys.CopyOnFork {
		t.Errorf("the kernel does not report copy-on-fork (RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK): %+v", sys)
	}
	a, b := e.qp(t, uverbs.RC), e.qp(t, uverbs.RC)
	rdmatest.ConnectRC(t, a, b)
	const access = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	buf, err := uverbs.AllocBuffer(4 * 4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	bufMR, err := e.pd.RegMR(buf.Bytes(), access)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bufMR.Close() })
	heap := make([]byte, 4*4096)
	heapMR, err := e.pd.RegMR(heap, access)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { heapMR.Close() })

	// One round: a writes a fresh pattern from the heap MR into the
	// buffer, and from the buffer back into the heap MR's other half; both
	// copies must show the pattern the parent wrote just before.
	seq := byte(0)
	round := func(step string) {
		t.Helper()
		seq++
		pattern := bytes.Repeat([]byte{seq, ^seq, 0x5a, seq}, 1024)
		copy(heap[:4096], pattern)
		copy(buf.Bytes()[:4096], pattern)
		if _, err := a.PostSend([]uverbs.SendWR{
			{WRID: 1, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{rdmatest.SGE(t, heapMR, 0, 4096)},
				RemoteAddr: bufMR.Addr() + 8192, RKey: bufMR.RKey()},
			{WRID: 2, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{rdmatest.SGE(t, bufMR, 0, 4096)},
				RemoteAddr: heapMR.Addr() + 8192, RKey: heapMR.RKey()},
		}); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if w := rdmatest.PollN(t, e.cq, 1)[0]; w.Status != cq.Success {
			t.Fatalf("%s: completion %+v", step, w)
		}
		if !bytes.Equal(buf.Bytes()[8192:8192+4096], pattern) {
			t.Errorf("%s: the buffer did not get the heap's new bytes", step)
		}
		if !bytes.Equal(heap[8192:8192+4096], pattern) {
			t.Errorf("%s: the heap did not get the buffer's bytes", step)
		}
	}
	round("before any child")

	// Children started the Go way, while traffic runs.
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 3; i++ {
			if err := exec.Command(os.Args[0], "-test.run=^$").Run(); err != nil {
				done <- err
				return
			}
			pid, err := syscall.ForkExec(os.Args[0], []string{os.Args[0], "-test.run=^$"}, &syscall.ProcAttr{})
			if err != nil {
				done <- err
				return
			}
			var ws syscall.WaitStatus
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
				done <- &os.SyscallError{Syscall: "wait4", Err: err}
				return
			}
		}
		done <- nil
	}()
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("starting a child: %v", err)
			}
			running = false
		default:
			round("while os/exec and ForkExec start children")
		}
	}

	// A real fork: the child scribbles over its copy of the heap MR and
	// tries the AllocBuffer (absent from it, so EFAULT), sleeps so that
	// the parent's traffic overlaps its life, and exits with what it saw.
	before := bytes.Clone(heap)
	pid, errno := rawForkScribble(heap, buf.Bytes())
	if errno != 0 {
		t.Fatalf("fork: %v", errno)
	}
	round("while a forked child lives")
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	if !ws.Exited() || ws.ExitStatus() != forkChildSawAll {
		t.Errorf("forked child: %v, exit status %d; want %d (heap copy writable, buffer absent)", ws, ws.ExitStatus(), forkChildSawAll)
	}
	if !bytes.Equal(heap[4096:8192], before[4096:8192]) {
		t.Error("the child's writes reached the parent's heap")
	}
	round("after the forked child")
}

// The forked child's exit status: bit 0 when its write into the heap
// MR's pages worked (on its own copy), bit 1 when the AllocBuffer was
// not mapped in it (MADV_DONTFORK).
const forkChildSawAll = 3

var (
	forkAllSignals = ^uint64(0)
	forkChildNap   = unix.Timespec{Nsec: 200e6}
)

// rawForkScribble forks with clone(SIGCHLD), as fork(2) does, with every
// signal blocked so that the child runs no handler. The child makes only
// raw system calls: getrandom over heap[4096:8192] and over buf, a nap,
// exit_group. It is nosplit and norace, as the runtime's own fork path is,
// because the child has one thread and no runtime to call into.
//
//go:nosplit
//go:norace
func rawForkScribble(heap, buf []byte) (int, syscall.Errno) {
	var old uint64
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&forkAllSignals)), uintptr(unsafe.Pointer(&old)), 8, 0, 0)
	pid, _, errno := syscall.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if errno == 0 && pid == 0 {
		status := uintptr(0)
		if _, _, e := syscall.RawSyscall(unix.SYS_GETRANDOM, uintptr(unsafe.Pointer(&heap[4096])), 4096, 0); e == 0 {
			status |= 1
		}
		if _, _, e := syscall.RawSyscall(unix.SYS_GETRANDOM, uintptr(unsafe.Pointer(&buf[0])), 4096, 0); e == unix.EFAULT {
			status |= 2
		}
		syscall.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&forkChildNap)), 0, 0)
		syscall.RawSyscall(unix.SYS_EXIT_GROUP, status, 0, 0)
	}
	syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&old)), 0, 8, 0, 0)
	return int(pid), errno
}
