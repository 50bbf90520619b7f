package transport

import (
	"encoding/binary"
	"testing"
	"unsafe"
)

func TestLayouts(t *testing.T) {
	if s := unsafe.Sizeof(hdr{}); s != 24 {
		t.Errorf("sizeof(ib_uverbs_ioctl_hdr) = %d, want 24", s)
	}
	if o := unsafe.Offsetof(hdr{}.driverID); o != 16 {
		t.Errorf("offsetof(ib_uverbs_ioctl_hdr.driver_id) = %d, want 16", o)
	}
	if o := unsafe.Offsetof(attr{}.data); o != 8 {
		t.Errorf("offsetof(ib_uverbs_attr.data) = %d, want 8", o)
	}
	var c Cmd
	if got := uintptr(unsafe.Pointer(&c.attrs[0])) - uintptr(unsafe.Pointer(&c.hdr)); got != 24 {
		t.Errorf("attributes start %d bytes after the header, want 24", got)
	}
}

func TestCmdBuilder(t *testing.T) {
	c := new(Cmd)
	c.Reset(3, 0) // CQ, CQ_CREATE
	h := c.IDRNew(0)
	c.InU32(1, 10)
	c.InU64(2, 0x1122334455667788)
	big := c.In(7, 12)
	copy(big, "0123456789ab")
	c.Const(9, 4)
	c.FD(3, 5)
	o := c.Out(6, 4, true)
	c.Flags32(5, 2)
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	if c.hdr.numAttrs != 8 {
		t.Fatalf("numAttrs = %d, want 8", c.hdr.numAttrs)
	}
	want := []struct {
		id, len, flags uint16
		inline         uint64 // checked when not a pointer
		ptr            bool
	}{
		{0, 0, attrFMandatory, 0, false},
		{1, 4, attrFMandatory, 10, false},
		{2, 8, attrFMandatory, 0x1122334455667788, false},
		{7, 12, attrFMandatory, 0, true},
		{9, 8, attrFMandatory, 4, false},
		{3, 0, attrFMandatory, 5, false},
		{6, 4, attrFMandatory, 0, true},
		{5, 4, attrFMandatory, 2, false},
	}
	for i, w := range want {
		a := c.attrs[i]
		if a.attrID != w.id || a.len != w.len || a.flags != w.flags {
			t.Errorf("attr %d = {id %d len %d flags %d}, want {%d %d %d}", i, a.attrID, a.len, a.flags, w.id, w.len, w.flags)
		}
		if w.ptr {
			base, end := uintptr(unsafe.Pointer(&c.arena[0])), uintptr(unsafe.Pointer(&c.arena[len(c.arena)-1]))
			if p := uintptr(a.data); p < base || p > end || p%arenaAlign != 0 {
				t.Errorf("attr %d points to %#x, outside the arena or unaligned", i, p)
			}
		} else if got := inlineValue(&a); got != w.inline {
			t.Errorf("attr %d data = %#x, want %#x", i, got, w.inline)
		}
	}
	if off := uintptr(c.attrs[3].data) - uintptr(unsafe.Pointer(&c.arena[0])); string(c.arena[off:off+12]) != "0123456789ab" {
		t.Errorf("PTR_IN payload = %q", c.arena[off:off+12])
	}
	// The kernel's write-back.
	c.attrs[h].data = 77
	if got := c.NewHandle(h); got != 77 {
		t.Errorf("NewHandle = %d, want 77", got)
	}
	if c.Output(o) != nil {
		t.Error("Output without VALID_OUTPUT is not nil")
	}
	c.attrs[6].flags |= attrFValidOutput
	binary.NativeEndian.PutUint32(c.arena[c.outs[o].off:], 99)
	if got := binary.NativeEndian.Uint32(c.Output(o)); got != 99 {
		t.Errorf("Output = %d, want 99", got)
	}
	if c.Output(-1) != nil || c.Output(5) != nil || c.NewHandle(-1) != 0 || c.NewFD(40) != -1 {
		t.Error("out-of-range handles are not refused")
	}
}

// inlineValue is what the kernel reads from an inline attribute: a 4-byte
// one (a u32 PTR_IN, FLAGS) from the first four bytes of data, in memory
// order (uverbs_copy_from, uverbs_get_flags64), others as data's value (IDR,
// FD, CONST, 8-byte PTR_IN and FLAGS). On big-endian machines the two differ.
func inlineValue(a *attr) uint64 {
	if a.len == 4 {
		return uint64(binary.NativeEndian.Uint32((*[8]byte)(unsafe.Pointer(&a.data))[:4]))
	}
	return a.data
}

func TestCmdLimits(t *testing.T) {
	c := new(Cmd)
	c.Reset(0, 0)
	for i := 0; i < MaxAttrs; i++ {
		c.Const(uint16(i), 0)
	}
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
	c.Const(99, 0)
	if c.Err() == nil {
		t.Error("attribute past MaxAttrs accepted")
	}
	c.Reset(0, 0)
	if c.Err() != nil {
		t.Error("Reset kept the error")
	}
	_ = c.In(1, ArenaSize+1)
	if c.Err() == nil {
		t.Error("payload past the arena accepted")
	}
}

func TestCmdAllocs(t *testing.T) {
	c := new(Cmd)
	n := testing.AllocsPerRun(100, func() {
		c.Reset(3, 0)
		c.IDRNew(0)
		c.InU32(1, 10)
		copy(c.In(7, 32), "x")
		c.Out(6, 4, true)
		c.UHWOut(16)
		req := c.ResetWrite(23, false, 8, 0)
		binary.NativeEndian.PutUint32(req, 1)
	})
	if n != 0 {
		t.Errorf("building commands allocates %v times per run, want 0", n)
	}
}
