package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

// FuzzParseDest reads any 52-byte address message of ibv_rc_pingpong's
// exchange. What it accepts has a 16-bit LID and 24-bit QPN and PSN, and
// reads back the same from the message goverbs would send for it.
func FuzzParseDest(f *testing.F) {
	gid := uverbs.GID{0xfe, 0x80, 15: 1}
	f.Add(ppDest{LID: 0, QPN: 0x11, PSN: 0xabcdef, GID: gid}.wire())
	f.Add(ppDest{LID: 0xffff, QPN: 0xffffff, PSN: 0}.wire())
	f.Add([]byte("0000:000011:abcdef:fe800000000000000000000000000001\x00"))
	f.Add([]byte("0000:000011:abcdef:FE800000000000000000000000000001")) // no NUL, upper case
	f.Add([]byte("0000:1000000:00000:fe800000000000000000000000000001\x00"))
	f.Add([]byte("+0:0x11:-1:fe80000000000000000000000000000g\x00"))
	f.Add([]byte("done\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseDest(b)
		if err != nil {
			return
		}
		if d.QPN > 0xffffff || d.PSN > 0xffffff {
			t.Fatalf("%q accepted with QPN %#x, PSN %#x", b, d.QPN, d.PSN)
		}
		w := d.wire()
		if len(w) != ppMsgLen || w[ppMsgLen-1] != 0 {
			t.Fatalf("%+v sends as %q: not a %d-byte C string", d, w, ppMsgLen)
		}
		back, err := parseDest(w)
		if err != nil || back != d {
			t.Fatalf("%q read as %+v, sent as %q, read back as %+v, %v", b, d, w, back, err)
		}
	})
}

// FuzzDestRoundTrip formats any address and reads it back: the same
// address for what the wire can carry, and an error, never another
// address, for a QPN or PSN wider than 24 bits.
func FuzzDestRoundTrip(f *testing.F) {
	f.Add(uint16(1), uint32(0x11), uint32(0xabcdef), []byte{0xfe, 0x80, 15: 1})
	f.Add(uint16(0xffff), uint32(0x1000000), uint32(0), []byte{})
	f.Fuzz(func(t *testing.T, lid uint16, qpn, psn uint32, g []byte) {
		d := ppDest{LID: lid, QPN: qpn, PSN: psn}
		copy(d.GID[:], g)
		back, err := parseDest(d.wire())
		switch {
		case qpn > 0xffffff || psn > 0xffffff:
			if err == nil {
				t.Fatalf("%+v, which the wire cannot carry, read back as %+v", d, back)
			}
		case err != nil || back != d:
			t.Fatalf("%+v read back as %+v, %v", d, back, err)
		}
	})
}

// FuzzPerfPeer reads any line of goverbs perf's JSON exchange as
// perfExchange does (readLine, then parsePeer). What it accepts has a
// 24-bit QPN and PSN and survives a second trip over the wire unchanged;
// a line our own encoder makes too long for readLine is refused, not cut.
func FuzzPerfPeer(f *testing.F) {
	good, _ := json.Marshal(perfPeer{QPN: 0x11, PSN: 0xabcdef, LID: 1, GID: uverbs.GID{0xfe, 0x80, 15: 1},
		RKey: 0x1234, Addr: 0x7f0000001000, Test: "send_lat", Size: 64, N: 1000})
	f.Add(append(good, '\n', 1)) // the line, then perfSync's byte
	f.Add([]byte(`{"qpn":16777216,"psn":1,"gid":[1,2,3]}` + "\n"))
	f.Add([]byte(`{"gid":[256],"size":-1,"iters":1e99}` + "\n"))
	f.Add([]byte(`{"test":"\ud800<>&\u2028"}` + "\n"))
	f.Add([]byte(`null` + "\n"))
	f.Add([]byte(`{"qpn":1`))
	f.Add(append(bytes.Repeat([]byte{' '}, 5000), '\n'))
	f.Fuzz(func(t *testing.T, in []byte) {
		line, err := readLine(bytes.NewReader(in))
		if err != nil {
			return
		}
		if len(line) >= 4096 || bytes.IndexByte(line, '\n') >= 0 {
			t.Fatalf("readLine returned %d bytes, a newline among them: %q", len(line), line)
		}
		p, err := parsePeer(line)
		if err != nil {
			return
		}
		if p.QPN > 0xffffff || p.PSN > 0xffffff {
			t.Fatalf("%q accepted with QPN %#x, PSN %#x", line, p.QPN, p.PSN)
		}
		var wire bytes.Buffer
		if err := json.NewEncoder(&wire).Encode(p); err != nil {
			t.Fatal(err)
		}
		n := wire.Len() - 1 // the line, without its newline
		line2, err := readLine(&wire)
		if err != nil {
			if n < 4096 {
				t.Fatalf("%+v encoded as a %d-byte line that readLine refuses: %v", p, n, err)
			}
			return
		}
		p2, err := parsePeer(line2)
		if err != nil || p2 != p {
			t.Fatalf("%q read as %+v, sent as %q, read back as %+v, %v", line, p, line2, p2, err)
		}
	})
}
