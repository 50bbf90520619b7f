package mutex

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/internal/release"
	"github.com/goverbs/goverbs/internal/testutil"
)

// waits runs f twice: with waiters fencing the unlockers as they do on
// this platform, and with the fence failing, so that on x86 parked
// waiters rely on the backstop timer.
func waits(t *testing.T, f func(t *testing.T)) {
	t.Run("fence", f)
	t.Run("nofence", func(t *testing.T) {
		fence = func() bool { return false }
		defer func() { fence = barrier }()
		f(t)
	})
}

// TestFenced checks that waiters can fence on Linux: the VM's kernels have
// membarrier(2), so there it must work; on a host a seccomp filter may
// refuse it.
func TestFenced(t *testing.T) {
	want := runtime.GOOS == "linux"
	if got := Fenced(); got != want {
		if !testutil.InVM() && !got {
			t.Skipf("Fenced() = false: membarrier(2) refused on this host")
		}
		t.Fatalf("Fenced() = %v, want %v", got, want)
	}
	if want && !barrier() {
		t.Fatal("membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after registering")
	}
	t.Logf("release.Plain = %v, Fenced() = %v", release.Plain, Fenced())
}

// TestExclusion runs goroutines through one lock, each section touching a
// plain counter and checking that it is alone; some sections yield, some
// sleep, so that waiters spin, park and are woken, and Lock, TryLock and
// Grab race fast-path takers against woken ones.
func TestExclusion(t *testing.T) {
	waits(t, func(t *testing.T) {
		var (
			m      Mutex
			inside atomic.Int32
			count  int
			wg     sync.WaitGroup
		)
		const goroutines, rounds = 8, 2000
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range rounds {
					switch (g + i) % 5 {
					case 0:
						for !m.TryLock() {
							runtime.Gosched()
						}
					case 1:
						for !m.Grab() {
							runtime.Gosched()
						}
					default:
						m.Lock()
					}
					if inside.Add(1) != 1 {
						t.Error("two goroutines inside the lock")
					}
					count++
					switch {
					case i%97 == 0:
						time.Sleep(50 * time.Microsecond)
					case i%7 == 0:
						runtime.Gosched()
					}
					inside.Add(-1)
					m.Unlock()
				}
			}()
		}
		wg.Wait()
		if count != goroutines*rounds {
			t.Fatalf("count = %d, want %d", count, goroutines*rounds)
		}
		if n := m.waiters.Load(); n != 0 {
			t.Fatalf("%d waiters left counted in", n)
		}
	})
}

// TestParkedWaitersWake holds the lock long enough for every waiter to
// park, then lets go: each must get it in turn. A lost wake-up hangs
// here (with the fence) or shows as a wait of the backstop's length.
func TestParkedWaitersWake(t *testing.T) {
	waits(t, func(t *testing.T) {
		var m Mutex
		m.Lock()
		const waiters = 4
		done := make(chan int, waiters)
		for w := range waiters {
			go func() {
				m.Lock()
				time.Sleep(time.Millisecond)
				m.Unlock()
				done <- w
			}()
		}
		deadline := time.Now().Add(10 * time.Second)
		for m.waiters.Load() != waiters {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d waiters parked after 10 s", m.waiters.Load(), waiters)
			}
			time.Sleep(time.Millisecond)
		}
		if m.TryLock() {
			t.Fatal("TryLock took a held lock")
		}
		if m.Grab() {
			t.Fatal("Grab took a held lock")
		}
		m.Unlock()
		for range waiters {
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("a parked waiter was not woken (%d still counted in)", m.waiters.Load())
			}
		}
		if !m.TryLock() {
			t.Fatal("TryLock failed on a free lock")
		}
		m.Unlock()
		if !m.Grab() {
			t.Fatal("Grab failed on a free lock")
		}
		m.Unlock()
	})
}

// TestBackstop parks a waiter whose wake-up is lost, as store-load
// reordering could lose it on x86 without membarrier(2): counted in, but
// the unlock happens without a wake. The timer must wake it.
func TestBackstop(t *testing.T) {
	if !release.Plain {
		t.Skip("the backstop is armed only where Unlock's store is a plain one (x86 without the race detector)")
	}
	fence = func() bool { return false }
	defer func() { fence = barrier }()
	var m Mutex
	m.Lock()
	got := make(chan struct{})
	go func() {
		m.Lock()
		close(got)
	}()
	for m.waiters.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	p := m.park.Load()
	p.mu.Lock() // the waiter has parked: it releases mu only in cond.Wait
	timer := p.timer != nil
	p.mu.Unlock()
	if !timer {
		t.Fatal("the waiter parked without arming the backstop")
	}
	m.state.Store(0) // an Unlock that read no waiter
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the backstop did not wake the waiter")
	}
	m.Unlock()
}

// TestSize holds a Mutex to 16 bytes on 64-bit platforms: its waiting
// room is elsewhere.
func TestSize(t *testing.T) {
	if got, want := unsafe.Sizeof(Mutex{}), 8+unsafe.Sizeof(uintptr(0)); got != want {
		t.Errorf("Mutex is %d bytes, want %d", got, want)
	}
}

// TestNoAllocs holds Lock, TryLock, Grab and Unlock to no allocation.
func TestNoAllocs(t *testing.T) {
	var (
		m Mutex
		k int
	)
	if n := testing.AllocsPerRun(1000, func() {
		m.Lock()
		k++
		m.Unlock()
		if m.TryLock() {
			k++
			m.Unlock()
		}
		if m.Grab() {
			k++
			m.Unlock()
		}
	}); n != 0 {
		t.Errorf("%v allocations per Lock, Unlock, TryLock, Unlock, Grab, Unlock", n)
	}
}

func BenchmarkLockUnlock(b *testing.B) {
	b.Run("sync.Mutex", func(b *testing.B) {
		var m sync.Mutex
		n := 0
		for b.Loop() {
			m.Lock()
			n++
			m.Unlock()
		}
	})
	b.Run("mutex.Mutex", func(b *testing.B) {
		var m Mutex
		n := 0
		for b.Loop() {
			m.Lock()
			n++
			m.Unlock()
		}
	})
}
