package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

var roles = Roles{
	// echo prints its args, then each line of stdin back with "ECHO "
	// before it, and a progress line between, until stdin ends.
	"echo": func(args []string) error {
		fmt.Println("ARGS " + strings.Join(args, " "))
		s := bufio.NewScanner(os.Stdin)
		for i := 0; s.Scan(); i++ {
			fmt.Printf("PROGRESS %d\n", i)
			fmt.Println("ECHO " + s.Text())
		}
		return s.Err()
	},
	// file writes its first arg to fd 3.
	"file": func(args []string) error {
		_, err := os.NewFile(3, "fd3").WriteString(args[0])
		return err
	},
	"fail":  func([]string) error { return errors.New("as asked") },
	"sleep": func([]string) error { time.Sleep(time.Hour); return nil },
}

func TestMain(m *testing.M) { roles.Main(m) }

func TestRoleStdinStdoutTap(t *testing.T) {
	var tapped []string
	p := StartRole(t, "echo", &ProcOptions{Tap: func(l string) bool {
		if strings.HasPrefix(l, "PROGRESS ") {
			tapped = append(tapped, l)
			return true
		}
		return false
	}}, "a", "b")
	if got := p.Expect(t, "ARGS ", 30*time.Second); got != "a b" {
		t.Errorf("args %q, want %q", got, "a b")
	}
	for _, w := range []string{"one", "two"} {
		fmt.Fprintln(p.Stdin(), w)
		if got := p.Expect(t, "", 30*time.Second); got != "ECHO "+w {
			t.Errorf("next line %q, want %q (the tap keeps progress lines)", got, "ECHO "+w)
		}
	}
	p.Stdin().Close()
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait: %v\n%s", err, p.Output())
	}
	if want := "ARGS a b\nPROGRESS 0\nECHO one\nPROGRESS 1\nECHO two\nROLE OK"; p.Output() != want {
		t.Errorf("output %q, want %q", p.Output(), want)
	}
	if len(tapped) != 2 {
		t.Errorf("the tap kept %q, want two progress lines", tapped)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill after the process exited: %v, want Wait's nil", err)
	}
}

func TestRoleFilesAndFailure(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "fd3")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := StartRole(t, "file", &ProcOptions{Files: []*os.File{f}}, "written by the role")
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait: %v\n%s", err, p.Output())
	}
	if b, _ := os.ReadFile(f.Name()); string(b) != "written by the role" {
		t.Errorf("fd 3 got %q", b)
	}

	p = StartRole(t, "fail", nil)
	if got := p.Expect(t, "ROLE FAIL: ", 30*time.Second); got != "as asked" {
		t.Errorf("failure line %q", got)
	}
	var ee *exec.ExitError
	if err := p.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("a failed role's Wait: %v, want exit status 1", err)
	}

	p = StartRole(t, "no such role", nil)
	if err := p.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("an unknown role's Wait: %v, want exit status 2", err)
	}
}

func TestRoleKill(t *testing.T) {
	p := StartRole(t, "sleep", nil)
	err := p.Kill()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("Kill: %v, want death by SIGKILL", err)
	}
	if again := p.Wait(); again != err {
		t.Errorf("Wait after Kill: %v, want Kill's %v", again, err)
	}
}
