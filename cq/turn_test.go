package cq

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// turnLock excludes: goroutines that take it with lock and tryLock never
// overlap, and every lock ends (no wake-up lost).
func TestTurnLockExcludes(t *testing.T) {
	tl := newTurnLock()
	var inside, total int
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				if g%2 == 1 && i%3 == 0 {
					if !tl.tryLock() {
						continue
					}
				} else if err := tl.lock(context.Background()); err != nil {
					t.Error(err)
					return
				}
				if inside++; inside != 1 {
					t.Errorf("%d holders", inside)
				}
				total++
				inside--
				tl.unlock()
			}
		}()
	}
	wg.Wait()
	if total < 8*2000*5/6 {
		t.Errorf("%d sections", total)
	}
}

// A lock on a held turn ends with its context's error; the turn stays
// the holder's, and the next lock after the holder's unlock gets it.
func TestTurnLockContext(t *testing.T) {
	tl := newTurnLock()
	if !tl.tryLock() {
		t.Fatal("a fresh turn is held")
	}
	if tl.tryLock() {
		t.Fatal("tryLock took a held turn")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := tl.lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock on a held turn: %v, want DeadlineExceeded", err)
	}
	done := make(chan error)
	go func() { done <- tl.lock(context.Background()) }()
	time.Sleep(10 * time.Millisecond) // let it park (not needed for correctness)
	tl.unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a parked lock was not woken by unlock")
	}
	if tl.waiters.Load() != 0 {
		t.Errorf("%d waiters left", tl.waiters.Load())
	}
	tl.unlock()
	// A done context does not keep a free turn from being taken.
	cancel()
	if err := tl.lock(ctx); err != nil {
		t.Errorf("lock of a free turn with a done context: %v", err)
	}
}
