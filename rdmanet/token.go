package rdmanet

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Token names a region of the peer's memory that Conn.ReadAt and
// Conn.WriteAt may reach: what Region.Token returns on the peer, carried
// here however the application likes (its text form, String, fits a
// line of any protocol). A Token grants access: whoever holds it, on a
// connection to the region's process over the same device, may read and
// write the region until it is closed.
type Token struct {
	Addr uint64 // the region's first byte, as the peer's device addresses it
	Len  uint64 // the region's length in bytes
	RKey uint32 // the remote key of the peer's memory registration
}

// ErrRemoteAccess is what ReadAt and WriteAt return, wrapped, when the
// peer's device refuses the access: the token's region is closed, or the
// token never named one of the peer's regions. On a reliable connection
// the refusal also moves both queue pairs to the error state: the
// connection is broken for good, and each of its calls fails after it.
var ErrRemoteAccess = errors.New("rdmanet: the peer refused the remote access (its region is closed, or the token is not one of its regions); the connection is broken")

// String returns the token's text form, ParseToken's input: the address,
// length and remote key in lowercase hexadecimal, joined by colons
// ("7f3a5c200000:10000:1a2b").
func (t Token) String() string {
	b, _ := t.MarshalText()
	return string(b)
}

// MarshalText returns the text form of String; it never fails. With
// UnmarshalText it makes a Token encode as a string in JSON and the like.
func (t Token) MarshalText() ([]byte, error) {
	b := make([]byte, 0, 16+1+16+1+8)
	b = strconv.AppendUint(b, t.Addr, 16)
	b = append(b, ':')
	b = strconv.AppendUint(b, t.Len, 16)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(t.RKey), 16)
	return b, nil
}

// UnmarshalText sets t from its text form, as ParseToken does.
func (t *Token) UnmarshalText(b []byte) error {
	p, err := ParseToken(string(b))
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// ParseToken parses String's form: three hexadecimal numbers, the
// address, the length and the remote key, joined by colons. A token whose
// range wraps past the top of the address space cannot name a region and
// is an error too.
func ParseToken(s string) (Token, error) {
	a, rest, ok1 := strings.Cut(s, ":")
	l, k, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return Token{}, fmt.Errorf("rdmanet: token %.64q: want address:length:rkey in hexadecimal", s)
	}
	// strconv accepts signs, underscores and prefixes only where asked
	// (base 0); base 16 takes bare hex digits, as String writes them.
	addr, err1 := strconv.ParseUint(a, 16, 64)
	n, err2 := strconv.ParseUint(l, 16, 64)
	rkey, err3 := strconv.ParseUint(k, 16, 32)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Token{}, fmt.Errorf("rdmanet: token %.64q: want address:length:rkey in hexadecimal: %w", s, err)
	}
	t := Token{Addr: addr, Len: n, RKey: uint32(rkey)}
	if !t.valid() {
		return Token{}, fmt.Errorf("rdmanet: token %.64q: %d bytes at %#x wrap past the end of the address space", s, n, addr)
	}
	return t, nil
}

// valid reports whether the token's range fits in the address space.
func (t Token) valid() bool { return t.Addr+t.Len >= t.Addr }
