package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/uapi"
)

// The fuzz targets of what the kernel answers: async events as read from
// the event fd, and the device, port and GID-entry responses decoded into
// their public types. parseAsyncEvent, ParseGID and parseSysfsGIDType
// have theirs beside their tests.

// overlay copies b (zero-padded) into a T, as the kernel would have
// written it.
func overlay[T any](b []byte) (v T) {
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)), b)
	return v
}

// FuzzAsyncEvents writes any bytes into a pipe standing in for the async
// event fd and reads events from it as TryAsyncEvent does, with a few
// objects tracked. Each whole 16-byte record is one event, decoded as it
// was written; a partial one is an EIO error, and an empty fd is "none",
// so reading stops. Each event finds the ack counter of the object of its
// own kind and handle and of no other: a port event whose number equals
// a CQ's handle must not count against the CQ.
func FuzzAsyncEvents(f *testing.F) {
	ev := func(recs ...any) []byte {
		var b []byte
		for i := 0; i < len(recs); i += 2 {
			b = append(b, desc(uint64(recs[i].(int)), uint32(recs[i+1].(AsyncEventType)))...)
		}
		return b
	}
	f.Add(ev(7, EventCQErr, 1, EventPortActive, 7, EventQPFatal), uint64(7), uint64(1))
	f.Add(ev(1, EventPortErr, 1, EventCQErr), uint64(1), uint64(1)) // a port event about port 1, CQ 1 tracked
	f.Add(append(ev(3, EventSRQLimitReached), 1, 2, 3), uint64(3), uint64(3))
	f.Add(ev(9, EventWQFatal, 9, AsyncEventType(99), 0, EventDeviceFatal), uint64(9), uint64(0))
	f.Add([]byte{}, uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, stream []byte, h1, h2 uint64) {
		if len(stream) > 4096 { // well inside a pipe's buffer: the writes never block
			stream = stream[:4096]
		}
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		// Write record by record: the event fd returns whole records.
		for rest := stream; len(rest) > 0; {
			n, err := unix.Write(p[1], rest[:min(len(rest), asyncEventSize)])
			if err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		c := new(Context)
		type key = asyncKey
		tracked := map[key]*atomic.Uint32{}
		for _, k := range []key{{ElementCQ, h1}, {ElementQP, h1}, {ElementSRQ, h2}, {ElementWQ, h2}} {
			tracked[k] = c.trackAsync(k.kind, k.handle)
		}
		var seen []AsyncEvent
		c.events.onEvent = func(e AsyncEvent) { seen = append(seen, e) }
		want := map[key]uint32{}
		var buf [asyncEventSize]byte
		i := 0
		for ; ; i++ {
			if i > len(stream)/asyncEventSize+1 {
				t.Fatalf("read %d events out of %d bytes", i, len(stream))
			}
			e, ok, err := c.events.read(p[0], &buf)
			rec := stream[min(i*asyncEventSize, len(stream)):]
			switch {
			case len(rec) == 0:
				if ok || err != nil {
					t.Fatalf("read past the stream: %+v, %v, %v", e, ok, err)
				}
			case len(rec) < asyncEventSize:
				if ok || err == nil || !errors.Is(err, unix.EIO) {
					t.Fatalf("a %d-byte record read as %+v, %v, %v; want EIO", len(rec), e, ok, err)
				}
			default:
				if err != nil || !ok {
					t.Fatalf("record %d: %v, %v", i, ok, err)
				}
				w, _ := parseAsyncEvent(rec[:asyncEventSize])
				if e.Type != w.Type || e.Element != w.Element {
					t.Fatalf("record %d %x read as %+v", i, rec[:asyncEventSize], e)
				}
				k := key{e.Kind(), e.Element}
				if ctr, ok := tracked[k]; ok {
					if e.acks != ctr {
						t.Fatalf("%v: counter of another object", e)
					}
					want[k]++
				} else if e.acks != nil {
					t.Fatalf("%v carries a counter, but no such %v is tracked", e, e.Kind())
				}
				e.Ack()
				_ = e.String()
				continue
			}
			break
		}
		if len(seen) != min(i, len(stream)/asyncEventSize) {
			t.Fatalf("onEvent saw %d events of %d", len(seen), i)
		}
		for k, ctr := range tracked {
			if got := ctr.Load(); got != want[k] {
				t.Fatalf("%v %d: %d acks, want %d", k.kind, k.handle, got, want[k])
			}
		}
	})
}

// FuzzDeviceAttr converts any EX_QUERY_DEVICE answer: GUIDs read in
// network order (their String is their bytes in order), the firmware
// version prints the three 16-bit parts of fw_ver, and no count is
// negative, whatever the kernel's u32 and whatever the int size.
func FuzzDeviceAttr(f *testing.F) {
	var r uapi.IBUverbsExQueryDeviceResp
	r.Base.FwVer = 1<<32 | 2<<16 | 3
	r.Base.NodeGuid = binary.NativeEndian.Uint64([]byte{0x02, 0x50, 0xb6, 0xff, 0xfe, 0x5d, 0x20, 0xf8})
	r.Base.MaxQP, r.Base.MaxCQE, r.Base.PhysPortCnt = 0xffffffff, 0x80000000, 1
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r))
	f.Add(append([]byte(nil), raw...), uint32(uapi.RDMA_DRIVER_RXE))
	f.Add(append([]byte(nil), raw...), uint32(uapi.RDMA_DRIVER_MLX5))
	f.Add(bytes.Repeat([]byte{0xff}, int(unsafe.Sizeof(r))), uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, driver uint32) {
		r := overlay[uapi.IBUverbsExQueryDeviceResp](b)
		a := deviceAttr(&r, driver)
		guid := func(p *uint64) string {
			g := unsafe.Slice((*byte)(unsafe.Pointer(p)), 8)
			return fmt.Sprintf("%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7])
		}
		if got, want := a.NodeGUID.String(), guid(&r.Base.NodeGuid); got != want {
			t.Fatalf("node GUID %s, want %s", got, want)
		}
		if got, want := a.SysImageGUID.String(), guid(&r.Base.SysImageGuid); got != want {
			t.Fatalf("system image GUID %s, want %s", got, want)
		}
		var x, y, z uint64 // mlx5's "%d.%d.%04d" reads back with %d too
		if _, err := fmt.Sscanf(a.FWVersion, "%d.%d.%d", &x, &y, &z); err != nil || x<<32|y<<16|z != r.Base.FwVer&0xffff_ffff_ffff {
			t.Fatalf("fw_ver %#x printed as %q", r.Base.FwVer, a.FWVersion)
		}
		for name, n := range map[string]int{
			"MaxQP": a.MaxQP, "MaxQPWR": a.MaxQPWR, "MaxSGE": a.MaxSGE, "MaxCQ": a.MaxCQ, "MaxCQE": a.MaxCQE,
			"MaxMR": a.MaxMR, "MaxPD": a.MaxPD, "MaxSRQWR": a.MaxSRQWR, "MaxQPRdAtom": a.MaxQPRdAtom,
			"MaxMcastGrp": a.MaxMcastGrp, "MaxWQTypeRQ": a.MaxWQTypeRQ, "PhysPortCnt": a.PhysPortCnt,
		} {
			if n < 0 {
				t.Fatalf("%s = %d", name, n)
			}
		}
		if want := min(uint64(r.Base.MaxCQE), math.MaxInt); uint64(a.MaxCQE) != want {
			t.Fatalf("max_cqe %d read as %d", r.Base.MaxCQE, a.MaxCQE)
		}
		_ = a.AtomicCap.String()
	})
}

// FuzzPortAttr converts any QUERY_PORT answer: the extended speed wins
// when the kernel sets it, the GRH flag is the kernel's bit, and every
// enum prints, known or not.
func FuzzPortAttr(f *testing.F) {
	var r uapi.IBUverbsQueryPortRespEx
	r.LegacyResp.State, r.LegacyResp.MaxMTU, r.LegacyResp.ActiveMTU = 4, 5, 3
	r.LegacyResp.GIDTblLen, r.LegacyResp.LinkLayer, r.LegacyResp.ActiveSpeed = 1024, 2, 32
	raw := func() []byte {
		return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r))...)
	}
	f.Add(raw())
	binary.NativeEndian.PutUint32(r.Reserved[2:], 0x100) // XDR, from a 6.7+ kernel
	r.LegacyResp.Flags = uapi.IB_UVERBS_QPF_GRH_REQUIRED
	f.Add(raw())
	f.Add(bytes.Repeat([]byte{0xff}, int(unsafe.Sizeof(r))))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := overlay[uapi.IBUverbsQueryPortRespEx](b)
		a := portAttr(&r)
		want := Speed(r.LegacyResp.ActiveSpeed)
		if ex := binary.NativeEndian.Uint32(r.Reserved[2:]); ex != 0 {
			want = Speed(ex)
		}
		if a.ActiveSpeed != want {
			t.Fatalf("active speed %v, want %v", a.ActiveSpeed, want)
		}
		if a.GRHRequired != (r.LegacyResp.Flags&uapi.IB_UVERBS_QPF_GRH_REQUIRED != 0) {
			t.Fatalf("flags %#x: GRHRequired %v", r.LegacyResp.Flags, a.GRHRequired)
		}
		if a.GIDTblLen < 0 || a.PkeyTblLen < 0 {
			t.Fatalf("table lengths %d, %d", a.GIDTblLen, a.PkeyTblLen)
		}
		_ = a.State.String() + a.PhysState.String() + a.LinkLayer.String() + a.ActiveWidth.String() +
			a.ActiveSpeed.String() + a.MaxMTU.String() + a.ActiveMTU.String()
		_, _ = a.ActiveWidth.Lanes(), a.ActiveSpeed.Gbps()
	})
}

// FuzzGIDEntry converts any ib_uverbs_gid_entry: the GID is its 16 bytes
// in order (network order), and the rest the kernel's numbers.
func FuzzGIDEntry(f *testing.F) {
	e := kverbs.GIDEntry{GIDIndex: 1, PortNum: 1, GIDType: 2, NetdevIfindex: 2}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&e.GID)), 16), []byte{0xfe, 0x80, 15: 1})
	f.Add(append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&e)), unsafe.Sizeof(e))...))
	f.Add(bytes.Repeat([]byte{0xff}, int(unsafe.Sizeof(e))))
	f.Fuzz(func(t *testing.T, b []byte) {
		k := overlay[kverbs.GIDEntry](b)
		// A namer that knows the ifindex: no netlink query per input.
		names := netdevNamer{int(k.NetdevIfindex): "fuzz0"}
		got := gidEntry(&k, names)
		if want := GID(unsafe.Slice((*byte)(unsafe.Pointer(&k.GID)), 16)); got.GID != want {
			t.Fatalf("GID %x read as %x", want, got.GID)
		}
		if uint64(got.Index) != uint64(k.GIDIndex) && unsafe.Sizeof(0) == 8 {
			t.Fatalf("index %d read as %d", k.GIDIndex, got.Index)
		}
		if got.Port != int(k.PortNum) || got.Type != GIDType(k.GIDType) || got.Ifindex != int(k.NetdevIfindex) {
			t.Fatalf("%+v read as %+v", k, got)
		}
		if (got.Netdev == "fuzz0") != (got.Ifindex > 0) {
			t.Fatalf("ifindex %d named %q", got.Ifindex, got.Netdev)
		}
		_ = got.GID.String() + got.Type.String()
	})
}
