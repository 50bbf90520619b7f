package memorder

import (
	"sync/atomic"
	"testing"
)

func TestStoreRelease32(t *testing.T) {
	var x [3]uint32
	StoreRelease32(&x[1], 0xdeadbeef)
	if x != [3]uint32{0, 0xdeadbeef, 0} {
		t.Fatalf("got %#x", x)
	}
}

// A message passed through a release store and an acquire load arrives
// whole: the writer fills the payload, then publishes the index.
func TestStoreReleasePublishes(t *testing.T) {
	const n = 100000
	var payload [n]uint64
	var index uint32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint32(1); i <= n; i++ {
			payload[i-1] = uint64(i) * 3
			StoreRelease32(&index, i)
		}
	}()
	for seen := uint32(0); seen < n; {
		got := atomic.LoadUint32(&index)
		for ; seen < got; seen++ {
			if payload[seen] != uint64(seen+1)*3 {
				t.Fatalf("slot %d: %d before its index was published", seen, payload[seen])
			}
		}
	}
	<-done
}

func BenchmarkStoreRelease32(b *testing.B) {
	var x uint32
	for i := 0; i < b.N; i++ {
		StoreRelease32(&x, uint32(i))
	}
}

func BenchmarkAtomicStore32(b *testing.B) {
	var x uint32
	for i := 0; i < b.N; i++ {
		atomic.StoreUint32(&x, uint32(i))
	}
}
