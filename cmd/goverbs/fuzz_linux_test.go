package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

// The address message goes in ibv_rc_pingpong's 52 bytes, a C string,
// and reads back; uverbs' FuzzParseEndpoint and FuzzEndpointRoundTrip
// fuzz the text itself.
func TestPingpongMessage(t *testing.T) {
	e := uverbs.Endpoint{QPN: 0x11, PSN: 0xabcdef, GID: uverbs.GID{0xfe, 0x80, 15: 1}}
	w := ppWire(e)
	if string(w) != "0000:000011:abcdef:fe800000000000000000000000000001\x00" || len(w) != ppMsgLen || ppMsgLen != 52 {
		t.Fatalf("message %q (%d bytes)", w, len(w))
	}
	back, err := parseDest(w)
	if err != nil || back != e {
		t.Fatalf("read back as %+v, %v", back, err)
	}
	if _, err := parseDest([]byte("done\x00")); err == nil {
		t.Error(`"done" read as an address`)
	}
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
