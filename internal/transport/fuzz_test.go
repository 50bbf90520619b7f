package transport

import (
	"testing"
	"unsafe"
)

// FuzzCmd builds a command from a fuzz program (ioctl attributes and
// write-command regions of any size, past the arena included), lets a
// fuzz "kernel" write anything over the attributes and the arena, and then reads the outputs back as the verbs do. Nothing may
// panic; a command that fits has its arena regions 8-byte aligned,
// inside the arena and disjoint (an output never lands on an input);
// Output returns its region or nil (no VALID_OUTPUT), never another size;
// a command that does not fit says so in Err and Invoke's first check.
func FuzzCmd(f *testing.F) {
	f.Add([]byte{0, 4, 0, 1, 0, 0, 3, 12, 0, 4, 0, 0, 5, 16, 0}, []byte{})
	f.Add([]byte{6, 8, 0, 6, 56, 0, 8, 16, 0, 7, 8, 0}, []byte{0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 8, 0, 0, 8, 3, 255, 15}, make([]byte, 64))
	f.Add([]byte{6, 0, 16, 5, 0}, []byte{1})
	f.Fuzz(func(t *testing.T, prog, kernel []byte) {
		c := new(Cmd)
		c.Reset(1, 2)
		type region struct {
			b   []byte
			out Handle // -2 for inputs
			n   int
		}
		var regions []region
		var outs []region
		var slots []Slot
		writeOut := -1
		for len(prog) >= 3 {
			op, n := prog[0]%10, int(prog[1])|int(prog[2]&0x0f)<<8 // n < 4096: up to twice the arena
			prog = prog[3:]
			id := uint16(len(prog))
			switch op {
			case 0, 5:
				var h Handle
				if op == 0 {
					h = c.Out(id, n, n&1 != 0)
				} else {
					h = c.UHWOut(n)
				}
				if h >= 0 {
					o := c.outs[h]
					outs = append(outs, region{c.arena[o.off : o.off+o.len], h, n})
				}
			case 1:
				slots = append(slots, c.IDRNew(id))
			case 2:
				slots = append(slots, c.FDNew(id))
			case 3:
				b := c.In(id, n)
				if len(b) != n {
					t.Fatalf("In(%d) returned %d bytes", n, len(b))
				}
				clear(b) // writable, whatever happened
				if n > 8 {
					regions = append(regions, region{b, -2, n})
				}
			case 4:
				c.Const(id, uint64(n))
			case 6:
				in, out := n&0xff, n>>4
				req := c.ResetWrite(uint32(n), n&1 != 0, in, out)
				if len(req) != in {
					t.Fatalf("ResetWrite(in %d) returned %d bytes", in, len(req))
				}
				clear(req)
				regions, outs, slots = []region{{req, -2, in}}, nil, nil
				writeOut = out
				if out > 0 {
					regions = append(regions, region{c.CoreOut(), -2, out})
				}
			case 7, 8:
				if !c.write.active {
					continue
				}
				var b []byte
				if op == 7 {
					b = c.WriteUHWIn(n)
				} else {
					b = c.WriteUHWOut(n)
				}
				if len(b) != n {
					t.Fatalf("write UHW region of %d bytes returned as %d", n, len(b))
				}
				clear(b)
				regions = append(regions, region{b, -2, n})
			case 9:
				c.Reset(1, 2)
				regions, outs, slots, writeOut = nil, nil, nil, -1
			}
		}
		// Before the kernel writes, outputs read as nil.
		for _, o := range outs {
			if c.Output(o.out) != nil {
				t.Fatalf("output %d is valid before any kernel wrote it", o.out)
			}
		}
		// The kernel writes back into the attributes (flags, new handles
		// and fds; here the whole of each) and the arena (output bytes). It
		// never writes the header.
		k := kernel[copy(unsafe.Slice((*byte)(unsafe.Pointer(&c.attrs)), unsafe.Sizeof(c.attrs)), kernel):]
		copy(c.arena[:], k)

		err := c.Err()
		for _, o := range outs {
			b := c.Output(o.out)
			if b == nil {
				continue
			}
			if c.attrs[c.outs[o.out].attr].flags&attrFValidOutput == 0 {
				t.Fatalf("output %d returned without VALID_OUTPUT", o.out)
			}
			if len(b) != o.n || unsafe.SliceData(b) != unsafe.SliceData(o.b) {
				t.Fatalf("output %d of %d bytes returned as %d bytes elsewhere", o.out, o.n, len(b))
			}
		}
		for _, h := range []Handle{-1, Handle(c.nOut), MaxAttrs, 1 << 20} {
			if c.Output(h) != nil {
				t.Fatalf("Output(%d) of a command with %d outputs is not nil", h, c.nOut)
			}
		}
		for s := Slot(-2); s <= MaxAttrs+1; s++ {
			c.NewHandle(s)
			c.NewFD(s)
		}
		for _, s := range slots {
			if s >= 0 && c.NewHandle(s) != uint32(c.attrs[s].data) {
				t.Fatalf("NewHandle(%d) is not what the kernel wrote", s)
			}
		}
		if writeOut >= 0 && c.write.active {
			if b := c.CoreOut(); err == nil && len(b) != writeOut {
				t.Fatalf("CoreOut of a %d-byte response has %d bytes", writeOut, len(b))
			}
		}
		if err != nil {
			return // Invoke refuses it before any syscall
		}
		base := uintptr(unsafe.Pointer(&c.arena[0]))
		type span struct{ lo, hi uintptr }
		var spans []span
		for _, r := range append(regions, outs...) {
			if r.b == nil || r.n == 0 {
				continue
			}
			lo := uintptr(unsafe.Pointer(unsafe.SliceData(r.b)))
			hi := lo + uintptr(len(r.b))
			if lo < base || hi > base+ArenaSize {
				t.Fatalf("a %d-byte region lies outside the arena of a command that fits", r.n)
			}
			if (lo-base)%arenaAlign != 0 {
				t.Fatalf("a region at arena offset %d is not %d-byte aligned", lo-base, arenaAlign)
			}
			for _, s := range spans {
				if lo < s.hi && s.lo < hi {
					t.Fatalf("regions [%d, %d) and [%d, %d) overlap", lo-base, hi-base, s.lo-base, s.hi-base)
				}
			}
			spans = append(spans, span{lo, hi})
		}
	})
}
