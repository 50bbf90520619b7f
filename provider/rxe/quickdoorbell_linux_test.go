package rxe

import (
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uapi"
)

// PostSend rings a lone request's doorbell through RawSyscall (quick)
// only when the request carries at most quickDoorbellBytes and the send
// queue held no other: the kernel's work inside the write is then that
// request's alone, a few microseconds. Everything else goes through
// syscall.Syscall, which lets the runtime take the P from a long write.
var quickInline [32]byte

func TestQuickDoorbell(t *testing.T) {
	sgl := func(n uint32) []provider.SGE { return []provider.SGE{{Addr: 0x1000, Length: n, LKey: 1}} }
	write := func(n uint32) provider.SendWR {
		return provider.SendWR{Opcode: provider.WRRDMAWrite, SGL: sgl(n), RemoteAddr: 0x2000, RKey: 2}
	}
	// The inline data is copied from quickInline, a global: a local buffer
	// could live on a stack that moves (the address is a plain number).
	inline := provider.SendWR{Opcode: provider.WRSend, Flags: provider.SendInline,
		SGL: []provider.SGE{{Addr: uint64(uintptr(unsafe.Pointer(&quickInline[0]))), Length: uint32(len(quickInline))}}}
	for _, tc := range []struct {
		name    string
		wr      provider.SendWR
		pending bool // another request is still in the queue
		want    bool
	}{
		{"64-byte write", write(64), false, true},
		{"write of quickDoorbellBytes", write(quickDoorbellBytes), false, true},
		{"write of a byte more", write(quickDoorbellBytes + 1), false, false},
		{"32 bytes inline", inline, false, true},
		{"1 MiB read", provider.SendWR{Opcode: provider.WRRDMARead, SGL: sgl(1 << 20), RemoteAddr: 0x2000, RKey: 2}, false, false},
		{"64-byte write behind another request", write(64), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := hostSendQP(t, uapi.IB_UVERBS_QPT_RC, 2)
			if tc.pending {
				if _, err := q.postOneSend(&tc.wr); err != nil {
					t.Fatal(err)
				}
			}
			quick, err := q.postOneSend(&tc.wr)
			if err != nil {
				t.Fatal(err)
			}
			if quick != tc.want {
				t.Errorf("quick = %v, want %v", quick, tc.want)
			}
			// Both doorbells (here writes to /dev/null) allocate nothing.
			wrs := []provider.SendWR{tc.wr}
			if n := testing.AllocsPerRun(100, func() {
				if _, err := q.PostSend(wrs); err != nil {
					t.Fatal(err)
				}
				if !tc.pending {
					q.sq.cons.Store(q.sq.prod.Load()) // the kernel completes it
				} else {
					q.sq.cons.Store((q.sq.prod.Load() - 1) & q.sq.mask) // all but the last
				}
			}); n != 0 {
				t.Errorf("PostSend allocates %v times", n)
			}
		})
	}
}
