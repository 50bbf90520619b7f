package netlink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

// nlmsg encodes one netlink message: header, payload, padding to 4.
func nlmsg(typ, flags uint16, seq uint32, payload []byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(payload)+3)
	binary.NativeEndian.PutUint32(b[0:], uint32(unix.NLMSG_HDRLEN+len(payload)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// nlerr encodes the body of an NLMSG_ERROR: the code, the echoed request
// header (whole request unless capped), then TLVs.
func nlerr(code int32, echoLen uint32, tlvs []byte) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(code))
	h := make([]byte, unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(h, echoLen)
	return append(append(b, h...), tlvs...)
}

func extAck(msg string) []byte {
	b := NewBuilder(nil)
	b.String(unix.NLMSGERR_ATTR_MSG, msg)
	return b.Bytes()
}

// FuzzParseReplies splits any datagram as Execute does. Nothing panics;
// the messages it returns are data messages of the request's sequence
// number, their payloads copies (a later receive into the same buffer
// must not change them) that fit the datagram; and an error ends the
// reply with no messages.
func FuzzParseReplies(f *testing.F) {
	dev := NewBuilder(nil)
	dev.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, 1)
	dev.String(uapi.RDMA_NLDEV_ATTR_DEV_NAME, "rxe0")
	data := nlmsg(uapi.RDMA_NL_GET_TYPE(uapi.RDMA_NL_NLDEV, uapi.RDMA_NLDEV_CMD_GET), unix.NLM_F_MULTI, 7, dev.Bytes())
	f.Add(append(append([]byte(nil), data...), nlmsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, 7, make([]byte, 4))...), uint32(7))
	f.Add(append(nlmsg(99, 0, 6, []byte("stale")), nlmsg(unix.NLMSG_ERROR, 0, 7, nlerr(0, 16, nil))...), uint32(7))
	f.Add(nlmsg(unix.NLMSG_ERROR, unix.NLM_F_ACK_TLVS|unix.NLM_F_CAPPED, 7, nlerr(-17, 40, extAck("File exists"))), uint32(7))
	f.Add(nlmsg(unix.NLMSG_DONE, 0, 7, binary.NativeEndian.AppendUint32(nil, uint32(0xffffffff))), uint32(7))
	f.Add(append(nlmsg(unix.NLMSG_NOOP, 0, 7, nil), data...), uint32(7))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 3, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0}, uint32(7)) // length past the datagram
	f.Add([]byte{8, 0, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0}, uint32(7))             // length under the header
	f.Fuzz(func(t *testing.T, b []byte, seq uint32) {
		orig := append([]byte(nil), b...)
		prev := []Message{{Type: 1234, Payload: []byte("earlier")}}
		out, done, err := parseReplies(append([]Message(nil), prev...), b, seq)
		if !bytes.Equal(b, orig) {
			t.Fatal("parseReplies wrote to the datagram")
		}
		if err != nil {
			if out != nil || !done {
				t.Fatalf("error %v with %d messages, done %v", err, len(out), done)
			}
			return
		}
		if len(out) < 1 || !cmp.Equal(out[0], prev[0]) {
			t.Fatalf("the messages received before are lost: %+v", out)
		}
		total := 0
		for _, m := range out[1:] {
			switch m.Type {
			case unix.NLMSG_ERROR, unix.NLMSG_DONE, unix.NLMSG_NOOP, unix.NLMSG_OVERRUN:
				t.Fatalf("a control message (type %d) returned as data", m.Type)
			}
			if len(m.Payload) > 0 && !bytes.Contains(b, m.Payload) {
				t.Fatalf("payload %x is not in the datagram", m.Payload)
			}
			total += unix.NLMSG_HDRLEN + len(m.Payload)
		}
		if total > len(b) {
			t.Fatalf("%d messages of %d bytes in all out of a %d-byte datagram", len(out)-1, total, len(b))
		}
		var saved [][]byte
		for _, m := range out {
			saved = append(saved, append([]byte(nil), m.Payload...))
		}
		clear(b) // the next receive
		for i, m := range out {
			if !bytes.Equal(m.Payload, saved[i]) {
				t.Fatal("a payload aliases the receive buffer")
			}
		}
	})
}

// FuzzRepliesRoundTrip encodes messages of any types, payloads and
// sequence numbers into one datagram and splits it back: exactly the data
// messages of our sequence number come back, in order, with their
// payloads, up to the first ACK, DONE or NACK.
func FuzzRepliesRoundTrip(f *testing.F) {
	f.Add([]byte{20, 3, 0, 7, 2, 0, 3, 0}, []byte("rxe0\x00abcdefgh"), uint32(1))
	f.Add([]byte{20, 3, 1, 2, 2, 0, 0, 0}, []byte("x"), uint32(0))
	f.Fuzz(func(t *testing.T, spec, payloads []byte, seq uint32) {
		var dgram []byte
		var want []Message
		var wantErr, wantDone bool
		for i := 0; i+4 <= len(spec) && !wantErr && !wantDone; i += 4 {
			typ := uint16(spec[i]) | uint16(spec[i+1]&0x3)<<8 // control types included
			n := min(int(spec[i+2]), len(payloads))
			p := payloads[:n]
			payloads = payloads[n:]
			s := seq
			if spec[i+3]&1 != 0 {
				s++ // stale
			}
			if typ == unix.NLMSG_ERROR { // well formed: an ACK or a NACK
				code := -int32(spec[i+3] >> 1)
				p = nlerr(code, unix.NLMSG_HDRLEN, nil)
				if s == seq {
					wantErr, wantDone = code != 0, code == 0
				}
			}
			if typ == unix.NLMSG_DONE && s == seq {
				p, wantDone = nil, true
			}
			dgram = append(dgram, nlmsg(typ, 0, s, p)...)
			if s == seq && (typ == 0 || typ > unix.NLMSG_OVERRUN) { // 1-4 are control messages
				want = append(want, Message{Type: typ, Payload: append([]byte{}, p...)})
			}
		}
		out, done, err := parseReplies(nil, dgram, seq)
		if wantErr {
			var e *Error
			if !errors.As(err, &e) || out != nil || !done {
				t.Fatalf("a NACK read as %d messages, done %v, %v", len(out), done, err)
			}
			return
		}
		if err != nil || done != wantDone {
			t.Fatalf("done %v, %v; want done %v", done, err, wantDone)
		}
		if diff := cmp.Diff(want, out, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
	})
}

// FuzzParseAck decodes any NLMSG_ERROR body: nil only for a whole one
// whose code is 0; otherwise an *Error wrapping the errno (or a short-
// message error), with the extended-ack text when the TLVs hold one. An
// echoed length past the body, even past 2^31, is ignored, never indexed.
func FuzzParseAck(f *testing.F) {
	f.Add(uint16(0), nlerr(0, 16, nil))
	f.Add(uint16(unix.NLM_F_ACK_TLVS|unix.NLM_F_CAPPED), nlerr(-17, 40, extAck("File exists")))
	f.Add(uint16(unix.NLM_F_ACK_TLVS), append(nlerr(-22, 24, make([]byte, 8)), extAck("bad attr")...))
	f.Add(uint16(unix.NLM_F_ACK_TLVS), nlerr(-1, 0x80000000, extAck("x"))) // an echoed length past 2^31
	f.Add(uint16(unix.NLM_F_ACK_TLVS), nlerr(-1, 0xfffffff0, nil))
	f.Add(uint16(0), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, flags uint16, body []byte) {
		err := parseAck(flags, body)
		if len(body) < 4+unix.NLMSG_HDRLEN {
			if err == nil {
				t.Fatalf("a %d-byte error message read as an ACK", len(body))
			}
			return
		}
		code := int32(binary.NativeEndian.Uint32(body))
		if (err == nil) != (code == 0) {
			t.Fatalf("code %d read as %v", code, err)
		}
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Errno != unix.Errno(-code) || !errors.Is(err, unix.Errno(-code)) {
			t.Fatalf("code %d read as %#v", code, err)
		}
		if strings.ContainsRune(e.Msg, 0) || (e.Msg != "" && flags&unix.NLM_F_ACK_TLVS == 0) {
			t.Fatalf("flags %#x: message %q", flags, e.Msg)
		}
		_ = err.Error()
	})
}

// FuzzRDMAReplies decodes any payload as a device, port and chardev
// reply (nothing panics, strings stop at their NUL), and a reply built
// from fuzz values with extra attributes around reads back as built.
func FuzzRDMAReplies(f *testing.F) {
	f.Add([]byte{}, "rxe0", "d0", "uverbs0", uint32(1), uint64(0x0250b6fffe5d20f8), uint8(4))
	f.Add([]byte{8, 0, 1, 0, 1, 0, 0, 0, 9, 0, 2, 0, 'r', 'x', 'e', '0', 0}, "", "", "", uint32(0), uint64(0), uint8(0))
	f.Add([]byte{5, 0, 6, 0, 1, 0, 0, 0}, "a\x00b", "eth0", "uverbs1", uint32(0xffffffff), ^uint64(0), uint8(255))
	f.Fuzz(func(t *testing.T, payload []byte, name, netdev, chardev string, idx uint32, guid uint64, state uint8) {
		for _, s := range []string{parseDevice(payload).Name, parseDevice(payload).FWVersion, parseLink("", payload).Netdev} {
			if strings.ContainsRune(s, 0) {
				t.Fatalf("%q keeps a NUL", s)
			}
		}
		var c Chardev
		parseChardev(&c, payload)

		cstr := func(s string) string { s, _, _ = strings.Cut(s, "\x00"); return s }
		u64 := func(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }
		b := NewBuilder(nil)
		b.Add(999, payload) // an attribute nobody asks for
		b.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, idx)
		b.String(uapi.RDMA_NLDEV_ATTR_DEV_NAME, name)
		b.Add(uapi.RDMA_NLDEV_ATTR_NODE_GUID, u64(guid))
		b.Add(uapi.RDMA_NLDEV_ATTR_SYS_IMAGE_GUID, u64(^guid))
		b.String(uapi.RDMA_NLDEV_ATTR_FW_VERSION, netdev)
		b.String(uapi.RDMA_NLDEV_ATTR_DEV_PROTOCOL, "roce")
		b.Uint32(uapi.RDMA_NLDEV_ATTR_PORT_INDEX, idx>>8)
		b.Add(uapi.RDMA_NLDEV_ATTR_PORT_STATE, []byte{state})
		b.Add(uapi.RDMA_NLDEV_ATTR_PORT_PHYS_STATE, []byte{^state})
		b.String(uapi.RDMA_NLDEV_ATTR_NDEV_NAME, netdev)
		b.String(uapi.RDMA_NLDEV_ATTR_CHARDEV_NAME, chardev)
		b.Add(uapi.RDMA_NLDEV_ATTR_CHARDEV_ABI, u64(guid>>3))
		b.Add(uapi.RDMA_NLDEV_ATTR_CHARDEV, u64(guid<<3))
		b.Uint32(uapi.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, idx^1)
		b.Nested(998, func(b *Builder) { b.Uint32(uapi.RDMA_NLDEV_ATTR_DEV_INDEX, idx+1) }) // not read: nested
		if len(b.Bytes()) > 0xffff {
			return // past what one attribute length can say
		}
		wantDev := RDMADevice{Index: idx, Name: cstr(name), NodeGUID: guid, SysGUID: ^guid, FWVersion: cstr(netdev),
			Protocol: "roce", Ports: idx >> 8}
		if diff := cmp.Diff(wantDev, parseDevice(b.Bytes())); diff != "" {
			t.Fatalf("device (-want +got):\n%s", diff)
		}
		wantLink := RDMALink{Device: "rxe9", Port: idx >> 8, State: state, PhysState: ^state, Netdev: cstr(netdev)}
		if diff := cmp.Diff(wantLink, parseLink("rxe9", b.Bytes())); diff != "" {
			t.Fatalf("link (-want +got):\n%s", diff)
		}
		var gotCD Chardev
		parseChardev(&gotCD, b.Bytes())
		wantCD := Chardev{Name: cstr(chardev), ABI: guid >> 3, Dev: guid << 3, DriverID: idx ^ 1, HaveDriverID: true}
		if diff := cmp.Diff(wantCD, gotCD); diff != "" {
			t.Fatalf("chardev (-want +got):\n%s", diff)
		}
	})
}
