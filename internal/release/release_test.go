package release_test

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/goverbs/goverbs/internal/release"
)

func TestStore32(t *testing.T) {
	var x atomic.Uint32
	for _, v := range []uint32{1, 0xffffffff, 0, 42} {
		release.Store32(&x, v)
		if got := x.Load(); got != v {
			t.Fatalf("Store32(%#x): Load = %#x", v, got)
		}
	}
}

// TestStore32Ring runs a two-slot ring between two goroutines, each
// publishing its index with Store32 as rxe's rings do: the producer after
// writing a slot, the consumer after reading one. A slot read after the
// consumer published it (a load moved past the store) could show the
// producer's next value; a slot written after the producer published it,
// the previous one.
func TestStore32Ring(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Log("one CPU: the goroutines interleave but never run at once")
	}
	const (
		slots = 2
		words = 8
		n     = 200000
	)
	var (
		ring       [slots][words]uint64
		prod, cons atomic.Uint32
	)
	done := make(chan struct{})
	go func() { // producer
		defer close(done)
		for i := uint32(0); i < n; i++ {
			for i-cons.Load() == slots { // full
				runtime.Gosched()
			}
			s := &ring[i%slots]
			for w := range s {
				s[w] = uint64(i)<<8 | uint64(w)
			}
			release.Store32(&prod, i+1)
		}
	}()
	for i := uint32(0); i < n; i++ {
		for prod.Load() == i { // empty
			runtime.Gosched()
		}
		s := &ring[i%slots]
		bad := -1
		for w := range s {
			if s[w] != uint64(i)<<8|uint64(w) {
				bad = w
			}
		}
		release.Store32(&cons, i+1)
		if bad >= 0 {
			t.Fatalf("message %d, word %d: read %#x", i, bad, s[bad])
		}
	}
	<-done
}

func TestStore32Allocs(t *testing.T) {
	var x atomic.Uint32
	if a := testing.AllocsPerRun(100, func() { release.Store32(&x, 7) }); a != 0 {
		t.Fatalf("Store32 allocates: %v per run", a)
	}
}

func BenchmarkStore32(b *testing.B) {
	var x atomic.Uint32
	for i := 0; i < b.N; i++ {
		release.Store32(&x, uint32(i))
	}
}

func BenchmarkAtomicStore(b *testing.B) {
	var x atomic.Uint32
	for i := 0; i < b.N; i++ {
		x.Store(uint32(i))
	}
}
