package kverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// alignedBytes returns n zeroed bytes of 8-byte aligned memory, as a
// command's arena regions are.
func alignedBytes(n int) []byte {
	w := make([]uint64, (n+7)/8+1)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)
}

// FuzzExQueryDeviceResp reads any EX_QUERY_DEVICE response: the bytes up
// to its response_length (never less than the header the kernel always
// writes) come through unchanged, and those past it read as zero,
// whatever the kernel left there.
func FuzzExQueryDeviceResp(f *testing.F) {
	size := int(unsafe.Sizeof(uapi.IBUverbsExQueryDeviceResp{}))
	least := int(unsafe.Offsetof(uapi.IBUverbsExQueryDeviceResp{}.ResponseLength)) + 4
	resp := func(length uint32, fill byte) []byte {
		b := bytes.Repeat([]byte{fill}, size)
		binary.NativeEndian.PutUint32(b[least-4:], length)
		return b
	}
	f.Add(resp(uint32(size), 0xa5)) // a kernel that knows the whole struct
	f.Add(resp(200, 0x11))          // an older one
	f.Add(resp(0, 0xff))            // less than the header
	f.Add(resp(0x80000000, 0x5a))   // more than the struct, past int32
	f.Add(resp(0xffffffff, 0x01))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		out := alignedBytes(size)
		copy(out, in)
		raw := append([]byte(nil), out...)
		r := exQueryDeviceResp(out)
		got := unsafe.Slice((*byte)(unsafe.Pointer(&r)), size)
		valid := uint64(max(uint64(r.ResponseLength), uint64(least)))
		for i := range got {
			want := raw[i]
			if uint64(i) >= valid {
				want = 0
			}
			if got[i] != want {
				t.Fatalf("response_length %d: byte %d = %#x, want %#x", r.ResponseLength, i, got[i], want)
			}
		}
	})
}

// FuzzGIDTable reads any QUERY_GID_TABLE answer: a count the kernel wrote
// (or did not) and entries (or none) for a table of any size. A count
// past the room given, or entries missing, is EIO, never a read past
// them; otherwise exactly count entries are copied, as the kernel wrote
// them, and the rest of dst is untouched.
func FuzzGIDTable(f *testing.F) {
	entry := func(port, index uint32, gid byte) []byte {
		e := GIDEntry{GID: [2]uint64{0x80fe, uint64(gid) << 56}, GIDIndex: index, PortNum: port, GIDType: 2, NetdevIfindex: 2}
		return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&e)), unsafe.Sizeof(e))...)
	}
	two := append(entry(1, 0, 1), entry(1, 1, 2)...)
	f.Add(uint64(2), true, true, two, uint8(2))
	f.Add(uint64(2), true, true, two, uint8(8))
	f.Add(uint64(0), true, false, []byte{}, uint8(4))
	f.Add(uint64(3), true, true, two, uint8(2))     // more than asked for
	f.Add(uint64(1<<63), true, true, two, uint8(2)) // and more than any int
	f.Add(uint64(1), false, true, two, uint8(2))    // no count
	f.Add(uint64(1), true, false, two, uint8(2))    // no entries
	f.Fuzz(func(t *testing.T, count uint64, haveNum, haveEnts bool, ents []byte, dstLen uint8) {
		size := int(unsafe.Sizeof(GIDEntry{}))
		dst := make([]GIDEntry, int(dstLen)%(MaxGIDTableEntries+1))
		var nb, b []byte
		if haveNum {
			nb = alignedBytes(8)
			binary.NativeEndian.PutUint64(nb, count)
		}
		if haveEnts {
			b = alignedBytes(len(dst) * size)
			copy(b, ents)
		}
		const fill = 0xfeed
		for i := range dst {
			dst[i].GIDIndex = fill
		}
		n, err := gidTable(dst, nb, b)
		switch {
		case !haveNum, count > uint64(len(dst)), count > 0 && !haveEnts:
			if !errors.Is(err, unix.EIO) || n != 0 {
				t.Fatalf("count %d (written %v) for %d entries (written %v): %d, %v; want EIO", count, haveNum, len(dst), haveEnts, n, err)
			}
		case err != nil || uint64(n) != count:
			t.Fatalf("count %d for %d entries: %d, %v", count, len(dst), n, err)
		}
		for i := range dst {
			var want GIDEntry
			if i < n {
				want = *(*GIDEntry)(unsafe.Pointer(&b[i*size]))
			} else {
				want.GIDIndex = fill
			}
			if dst[i] != want {
				t.Fatalf("dst[%d] = %+v, want %+v", i, dst[i], want)
			}
		}
	})
}
