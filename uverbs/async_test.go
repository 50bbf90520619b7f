package uverbs

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"
)

// desc builds a struct ib_uverbs_async_event_desc as the kernel writes it.
func desc(element uint64, typ uint32) []byte {
	b := make([]byte, asyncEventSize)
	binary.NativeEndian.PutUint64(b[0:], element)
	binary.NativeEndian.PutUint32(b[8:], typ)
	return b
}

func TestParseAsyncEvent(t *testing.T) {
	for _, tt := range []struct {
		name    string
		in      []byte
		want    AsyncEvent
		wantErr bool
	}{
		{"port active", desc(1, 9), AsyncEvent{Type: EventPortActive, Element: 1}, false},
		{"port error", desc(1, 10), AsyncEvent{Type: EventPortErr, Element: 1}, false},
		{"CQ error", desc(0xfeedface12345678, 0), AsyncEvent{Type: EventCQErr, Element: 0xfeedface12345678}, false},
		{"QP fatal", desc(42, 1), AsyncEvent{Type: EventQPFatal, Element: 42}, false},
		{"unknown type", desc(3, 77), AsyncEvent{Type: 77, Element: 3}, false},
		{"reserved ignored", append(desc(1, 18)[:12], 1, 2, 3, 4), AsyncEvent{Type: EventGIDChange, Element: 1}, false},
		{"empty", nil, AsyncEvent{}, true},
		{"short", desc(1, 9)[:8], AsyncEvent{}, true},
		{"long", append(desc(1, 9), 0), AsyncEvent{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseAsyncEvent(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, syscall.EIO) {
				t.Errorf("err = %v, want it to wrap EIO", err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseAsyncEvent(f *testing.F) {
	f.Add(desc(1, 9))
	f.Add(desc(0, 0))
	f.Add(desc(1<<63, 1<<31))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := parseAsyncEvent(b)
		if err != nil {
			return
		}
		// Whatever the bytes, the event describes itself without panicking
		// and re-encodes to what was read (the reserved word aside).
		_ = ev.String()
		_ = ev.Kind().String()
		ev.Port()
		ev.CQHandle()
		ev.Ack() // nothing to count: no object is known
		if back := desc(ev.Element, uint32(ev.Type)); string(back[:12]) != string(b[:12]) {
			t.Fatalf("%x decoded to %+v, which encodes as %x", b, ev, back)
		}
	})
}

// The names are ibv_event_type_str's (libibverbs/enum_strs.c).
func TestAsyncEventTypeString(t *testing.T) {
	want := []string{
		"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
		"local access violation work queue error", "communication established", "send queue drained",
		"path migrated", "path migration request error", "local catastrophic error", "port active",
		"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error",
		"SRQ limit reached", "last WQE reached", "client reregistration", "GID table change",
		"WQ fatal", "Device link speed change",
	}
	for i, w := range want {
		if got := AsyncEventType(i).String(); got != w {
			t.Errorf("AsyncEventType(%d) = %q, want %q", i, got, w)
		}
	}
	if got := AsyncEventType(len(want)).String(); got != "unknown (21)" {
		t.Errorf("AsyncEventType(21) = %q", got)
	}
}

// What each event's element is, as ibv_get_async_event sorts them
// (libibverbs/device.c).
func TestAsyncEventElement(t *testing.T) {
	for _, tt := range []struct {
		typ  AsyncEventType
		kind ElementKind
	}{
		{EventCQErr, ElementCQ},
		{EventQPFatal, ElementQP}, {EventQPReqErr, ElementQP}, {EventQPAccessErr, ElementQP},
		{EventCommEst, ElementQP}, {EventSQDrained, ElementQP}, {EventPathMig, ElementQP},
		{EventPathMigErr, ElementQP}, {EventQPLastWQEReached, ElementQP},
		{EventSRQErr, ElementSRQ}, {EventSRQLimitReached, ElementSRQ},
		{EventWQFatal, ElementWQ},
		{EventPortActive, ElementPort}, {EventPortErr, ElementPort}, {EventLIDChange, ElementPort},
		{EventPKeyChange, ElementPort}, {EventSMChange, ElementPort}, {EventClientReregister, ElementPort},
		{EventGIDChange, ElementPort},
		{EventDeviceFatal, ElementDevice}, {EventDeviceSpeedChange, ElementDevice}, {99, ElementDevice},
	} {
		t.Run(tt.typ.String(), func(t *testing.T) {
			if got := tt.typ.Element(); got != tt.kind {
				t.Fatalf("Element() = %v, want %v", got, tt.kind)
			}
			ev := AsyncEvent{Type: tt.typ, Element: 7}
			checks := []struct {
				kind ElementKind
				get  func() (uint64, bool)
			}{
				{ElementCQ, ev.CQHandle}, {ElementQP, ev.QPHandle}, {ElementSRQ, ev.SRQHandle}, {ElementWQ, ev.WQHandle},
				{ElementPort, func() (uint64, bool) { p, ok := ev.Port(); return uint64(p), ok }},
			}
			for _, c := range checks {
				h, ok := c.get()
				if ok != (c.kind == tt.kind) || (ok && h != 7) {
					t.Errorf("as a %v: %d, %v", c.kind, h, ok)
				}
			}
		})
	}
	if p, ok := (AsyncEvent{Type: EventPortActive, Element: 256}).Port(); ok {
		t.Errorf("port 256 accepted as %d", p)
	}
	for ev, want := range map[AsyncEvent]string{
		{Type: EventPortActive, Element: 1}:      "port active (port 1)",
		{Type: EventCQErr, Element: 12}:          "CQ error (CQ 12)",
		{Type: EventDeviceFatal, Element: 1}:     "local catastrophic error",
		{Type: EventSRQLimitReached, Element: 3}: "SRQ limit reached (SRQ 3)",
	} {
		if got := ev.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", ev, got, want)
		}
	}
}

// rdma-core's query_sysfs_gid_type: "IB/RoCE v1" is IB on an InfiniBand
// port and RoCE v1 on an Ethernet one.
func TestParseSysfsGIDType(t *testing.T) {
	for _, tt := range []struct {
		in       string
		ethernet bool
		want     GIDType
		wantErr  bool
	}{
		{"IB/RoCE v1\n", false, GIDTypeIB, false},
		{"IB/RoCE v1\n", true, GIDTypeRoCEv1, false},
		{"RoCE v2\n", true, GIDTypeRoCEv2, false},
		{"RoCE v2", false, GIDTypeRoCEv2, false},
		{"RoCE v3\n", true, 0, true},
		{"", true, 0, true},
	} {
		got, err := parseSysfsGIDType(tt.in, tt.ethernet)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseSysfsGIDType(%q, %v) = %v, %v; want %v, error %v", tt.in, tt.ethernet, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseSysfsGIDType(f *testing.F) {
	f.Add("IB/RoCE v1\n", true)
	f.Add("RoCE v2", false)
	f.Fuzz(func(t *testing.T, s string, ethernet bool) {
		if typ, err := parseSysfsGIDType(s, ethernet); err == nil && typ > GIDTypeRoCEv2 {
			t.Fatalf("%q gave type %d", s, typ)
		}
	})
}
