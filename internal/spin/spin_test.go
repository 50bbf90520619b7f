package spin_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/spin"
)

// TestExclusion: goroutines (more than CPUs, so holders are descheduled
// while others wait) increment plain counters under the lock; any overlap
// loses increments, and under -race is reported.
func TestExclusion(t *testing.T) {
	const goroutines, rounds = 16, 20000
	var (
		l    spin.Lock
		a, b int
		wg   sync.WaitGroup
	)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l.Lock()
				a++
				if a%7 == 0 {
					runtime.Gosched() // descheduled while holding it
				}
				b = a
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	if a != goroutines*rounds || b != a {
		t.Fatalf("counters %d and %d, want %d", a, b, goroutines*rounds)
	}
}

// TestLongHolder: a holder in a sleep (as a CQ's lock is held across a
// system call) is waited for, not overtaken.
func TestLongHolder(t *testing.T) {
	var l spin.Lock
	l.Lock()
	got := make(chan struct{})
	go func() {
		l.Lock()
		close(got)
		l.Unlock()
	}()
	select {
	case <-got:
		t.Fatal("Lock returned while the lock was held")
	case <-time.After(20 * time.Millisecond):
	}
	l.Unlock()
	<-got
}

func TestTryLock(t *testing.T) {
	var l spin.Lock
	if !l.TryLock() {
		t.Fatal("TryLock of an unlocked lock failed")
	}
	if l.TryLock() {
		t.Fatal("TryLock of a locked lock succeeded")
	}
	l.Unlock()
	l.Lock()
	held := l.TryLock()
	l.Unlock()
	if held {
		t.Fatal("TryLock succeeded after Lock")
	}
}

func TestUnlockUnlocked(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Unlock of an unlocked lock did not panic")
		}
	}()
	var l spin.Lock
	l.Unlock()
}

func TestAllocs(t *testing.T) {
	var (
		l spin.Lock
		n int
	)
	if a := testing.AllocsPerRun(100, func() { l.Lock(); n++; l.Unlock() }); a != 0 {
		t.Fatalf("Lock and Unlock allocate: %v per run", a)
	}
}

func BenchmarkLockUnlock(b *testing.B) {
	var (
		l spin.Lock
		n int
	)
	for i := 0; i < b.N; i++ {
		l.Lock()
		n += i
		l.Unlock()
	}
}

func BenchmarkMutexLockUnlock(b *testing.B) {
	var (
		l sync.Mutex
		n int
	)
	for i := 0; i < b.N; i++ {
		l.Lock()
		n += i
		l.Unlock()
	}
}
