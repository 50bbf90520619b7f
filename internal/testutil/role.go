package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// roleEnv names the role a test binary's process plays (StartRole sets
// it; Roles.Main reads it).
const roleEnv = "GOVERBS_TEST_ROLE"

// Roles are the parts a test binary can play when a test runs it again
// as a process of its own, by name: a process to kill with SIGKILL, one
// that gives up a capability, a peer on another host. A package that
// has roles runs them from its TestMain:
//
//	var roles = testutil.Roles{"peer": runPeer}
//
//	func TestMain(m *testing.M) { roles.Main(m) }
//
// and a test starts one with StartRole.
type Roles map[string]func(args []string) error

// Main plays the role StartRole named, if any, and exits: status 0 with
// "ROLE OK" printed when the role's function returns nil, 1 with "ROLE
// FAIL: " and the error when it fails, 2 for a role r does not have.
// Without a role it runs the tests.
func (r Roles) Main(m *testing.M) {
	name := os.Getenv(roleEnv)
	if name == "" {
		os.Exit(m.Run())
	}
	fn, ok := r[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "testutil: this test binary has no role %q\n", name)
		os.Exit(2)
	}
	if err := fn(os.Args[1:]); err != nil {
		fmt.Printf("ROLE FAIL: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("ROLE OK")
	os.Exit(0)
}

// A Proc is a test binary's process playing a role, as the test that
// started it sees it: its stdin, its stdout line by line, its end. Its
// stderr is the test's.
type Proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // stdout but the lines Tap took; closed at its end
	mu    sync.Mutex
	out   []string // every line, for failures
	once  sync.Once
	err   error // the exit, once Wait has it
}

// ProcOptions are StartRole's optional settings.
type ProcOptions struct {
	// Files become the process's fds 3 and on.
	Files []*os.File
	// Tap, if not nil, sees each line of output first, on a goroutine of
	// its own; a line it returns true for (a progress report) is kept
	// from Expect.
	Tap func(line string) bool
}

// StartRole starts this test binary again as a process playing role
// (one of its package's Roles) with args. The test's end kills the
// process if it still runs: a cleanup the test registers after
// StartRole runs before that.
func StartRole(tb testing.TB, role string, opts *ProcOptions, args ...string) *Proc {
	tb.Helper()
	if opts == nil {
		opts = &ProcOptions{}
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = opts.Files
	p := &Proc{cmd: cmd, lines: make(chan string, 64)}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.ENOEXEC) {
			// Under qemu-user (make unit32, bigendian) the test binary
			// is a foreign one the kernel cannot start again; the host's
			// own run and the VMs run the test.
			tb.Skipf("cannot run this test binary again here: %v", err)
		}
		tb.Fatalf("start role %s: %v", role, err)
	}
	go func() {
		defer close(p.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			l := s.Text()
			p.mu.Lock()
			p.out = append(p.out, l)
			p.mu.Unlock()
			if opts.Tap == nil || !opts.Tap(l) {
				p.lines <- l
			}
		}
	}()
	tb.Cleanup(func() { p.Kill() })
	return p
}

// Stdin is the process's standard input; closing it gives the process
// an end of file.
func (p *Proc) Stdin() io.WriteCloser { return p.stdin }

// Output is every line the process printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.out, "\n")
}

// Expect returns the rest of the process's next line that starts with
// prefix, failing the test (and, at its end, killing the process) if the
// process ends first or prints none within limit.
func (p *Proc) Expect(tb testing.TB, prefix string, limit time.Duration) string {
	tb.Helper()
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				tb.Fatalf("the process ended before printing %q; its output:\n%s", prefix, p.Output())
			}
			if rest, ok := strings.CutPrefix(l, prefix); ok {
				return rest
			}
		case <-timeout.C:
			tb.Fatalf("the process printed no %q in %v; its output:\n%s", prefix, limit, p.Output())
		}
	}
}

// Drain reads the process's output until the process closes its
// stdout (exits, as a rule), and leaves the process to Wait, which
// closes the test's ends of its pipes.
func (p *Proc) Drain() {
	for range p.lines {
	}
}

// Wait reads the rest of the output, waits for the process to exit and
// returns how it exited (nil for status 0), as often as it is called.
func (p *Proc) Wait() error {
	p.once.Do(func() {
		p.Drain()
		p.err = p.cmd.Wait()
	})
	return p.err
}

// Signal sends the process sig and returns at once.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends the process SIGKILL, as the OOM killer or a crash would end
// it: no Close, no deferred function; the kernel alone cleans up after
// it. It returns once the process is gone and its output read, with
// Wait's error: a process that was still running when killed did not
// exit with status 0.
func (p *Proc) Kill() error {
	p.cmd.Process.Kill() // os.ErrProcessDone once it has been waited for
	return p.Wait()
}
