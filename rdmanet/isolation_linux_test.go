package rdmanet_test

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/goverbs/goverbs/rdmanet"
)

// TestIsolation is the hostile-peer matrix: a server with connections
// A and B, where B's peer tries what A's was granted. Each connection
// has a PD of its own, so every such try is a remote access error on
// B's side, A's memory stays byte for byte as it was (checksummed), and
// A's connection keeps working. A revoked token (a closed Region) fails
// too; the connection that used it breaks, as RC's remote access errors
// do, and the others stay up.
func TestIsolation(t *testing.T) {
	requireCM(t)
	l := listen(t, nil)
	conns := func() (cli, srv *rdmanet.Conn) {
		c, s := pair(t, l, nil)
		t.Cleanup(func() { c.Close(); s.Close() })
		return c.(*rdmanet.Conn), s.(*rdmanet.Conn)
	}
	ca, sa := conns()
	ra := allocRegion(t, sa, 8192, 1)
	sendToken(t, sa, ra.Token())
	tokA := recvToken(t, ca)
	sum := func(b []byte) uint32 { return crc32.ChecksumIEEE(b) }
	alive := func(what string, c, s *rdmanet.Conn) {
		t.Helper()
		msg := []byte("still up: " + what)
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("%s: write: %v", what, err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("%s: read %q, %v", what, got, err)
		}
	}
	evil := []byte("overwritten by another connection's peer")

	for _, tc := range []struct {
		name string
		tok  rdmanet.Token
		mem  []byte
	}{
		{"A's Region token", tokA, ra.Bytes()},
		{"A's ring token", rdmanet.RingToken(sa), rdmanet.Ring(sa)},
	} {
		cb, _ := conns()
		before := sum(tc.mem)
		if _, err := cb.WriteAt(tc.tok, 0, evil); !errors.Is(err, rdmanet.ErrRemoteAccess) {
			t.Errorf("B writes with %s: %v, want ErrRemoteAccess", tc.name, err)
		}
		cb2, _ := conns()
		if _, err := cb2.ReadAt(tc.tok, 0, make([]byte, 64)); !errors.Is(err, rdmanet.ErrRemoteAccess) {
			t.Errorf("B reads with %s: %v, want ErrRemoteAccess", tc.name, err)
		}
		if sum(tc.mem) != before {
			t.Errorf("B with %s: A's memory changed", tc.name)
		}
		alive("A after B tried "+tc.name, ca, sa)
	}
	// A's own grant works.
	if _, err := ca.WriteAt(tokA, 100, []byte("granted")); err != nil {
		t.Fatalf("A with its token: %v", err)
	}
	if string(ra.Bytes()[100:107]) != "granted" {
		t.Fatalf("A's write gave %q", ra.Bytes()[100:107])
	}

	// A revoked grant: the Region closes, A's later use fails, and B's
	// connection and grant stay as they were.
	cb, sb := conns()
	rb := allocRegion(t, sb, 4096, 2)
	sendToken(t, sb, rb.Token())
	tokB := recvToken(t, cb)
	r2 := allocRegion(t, sa, 4096, 3)
	sendToken(t, sa, r2.Token())
	tok2 := recvToken(t, ca)
	before := sum(r2.Bytes())
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.WriteAt(tok2, 0, evil); !errors.Is(err, rdmanet.ErrRemoteAccess) {
		t.Errorf("A with its revoked token: %v, want ErrRemoteAccess", err)
	}
	if sum(r2.Bytes()) != before {
		t.Error("the revoked region changed")
	}
	if _, err := cb.WriteAt(tokB, 0, []byte("B's grant")); err != nil {
		t.Errorf("B's grant after A's revocation: %v", err)
	}
	alive("B after A's revocation", cb, sb)
}
