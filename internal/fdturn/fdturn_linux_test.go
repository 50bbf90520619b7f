package fdturn

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil"
)

// pipeReader is a Reader of a non-blocking pipe's read end, and its write end.
func pipeReader(t *testing.T) (*Reader, *os.File, *os.File) {
	t.Helper()
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	rf, wf := os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	t.Cleanup(func() { rf.Close(); wf.Close() })
	var r Reader
	if err := r.Init(rf); err != nil {
		t.Fatal(err)
	}
	return &r, rf, wf
}

// The turn excludes: goroutines that take it with Lock and TryLock never
// overlap, and every Lock ends.
func TestTurnExcludes(t *testing.T) {
	r, _, _ := pipeReader(t)
	var inside, total int
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				if g%2 == 1 && i%3 == 0 {
					if !r.TryLock() {
						continue
					}
				} else if err := r.Lock(context.Background()); err != nil {
					t.Error(err)
					return
				}
				if inside++; inside != 1 {
					t.Errorf("%d holders", inside)
				}
				total++
				inside--
				r.Unlock()
			}
		}()
	}
	wg.Wait()
	// Every Lock got the turn; only a TryLock may come away without it.
	if locks := 8*2000 - 4*667; total < locks {
		t.Errorf("%d sections, want at least %d", total, locks)
	}
}

// A Lock on a held turn ends with its context's error; the next Lock
// after the holder's Unlock gets it, and a done context does not keep a
// free turn from being taken.
func TestTurnContext(t *testing.T) {
	r, _, _ := pipeReader(t)
	if !r.TryLock() {
		t.Fatal("a fresh turn is held")
	}
	if r.TryLock() {
		t.Fatal("TryLock took a held turn")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held turn: %v, want DeadlineExceeded", err)
	}
	done := make(chan error)
	go func() { done <- r.Lock(context.Background()) }()
	time.Sleep(10 * time.Millisecond)
	r.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting Lock did not get the turn")
	}
	r.Unlock()
	cancel()
	if err := r.Lock(ctx); err != nil {
		t.Errorf("Lock of a free turn with a done context: %v", err)
	}
	r.Unlock()
}

// Wait parks until the fd has something to read, ends with its
// context's error when the context ends, and after a Kick returns
// os.ErrDeadlineExceeded; the Wait after either parks again.
func TestWait(t *testing.T) {
	r, _, wf := pipeReader(t)
	var buf [8]byte
	var got int
	read := func(fd uintptr) bool {
		n, err := syscall.Read(int(fd), buf[:])
		if err == syscall.EAGAIN {
			return false
		}
		got = n
		return true
	}
	if err := r.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer r.Unlock()
	go func() { time.Sleep(10 * time.Millisecond); wf.Write([]byte("x")) }()
	if err := r.Wait(context.Background(), read); err != nil || got != 1 {
		t.Fatalf("Wait = %v, read %d bytes", err, got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Wait(ctx, read); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a context that ends: %v", err)
	}
	go func() { time.Sleep(10 * time.Millisecond); r.Kick() }()
	if err := r.Wait(context.Background(), read); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Wait kicked: %v", err)
	}
	got = 0
	wf.Write([]byte("yz"))
	if err := r.Wait(context.Background(), read); err != nil || got != 2 {
		t.Fatalf("Wait after a kick = %v, read %d bytes", err, got)
	}
	if testutil.Race {
		return // the race detector's instrumentation allocates
	}
	if n := testing.AllocsPerRun(100, func() {
		wf.Write([]byte("a"))
		r.Wait(context.Background(), read)
	}); n != 0 {
		t.Errorf("Wait allocates %v times", n)
	}
}
