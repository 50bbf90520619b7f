package netlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Conn is one netlink socket of a given protocol (unix.NETLINK_ROUTE,
// unix.NETLINK_RDMA).
type Conn struct {
	fd  int
	seq uint32
	buf []byte
}

// Dial opens a netlink socket of protocol proto, with extended acks on so
// that the kernel's error text reaches the caller.
func Dial(proto int) (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	// Best effort: kernels without extended acks still work, with plainer errors.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	return &Conn{fd: fd, buf: make([]byte, 64<<10)}, nil
}

// Close closes the socket. It is safe to call more than once.
func (c *Conn) Close() error {
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

// Message is one netlink message as received: its type and payload (the
// bytes after the 16-byte nlmsghdr).
type Message struct {
	Type    uint16
	Flags   uint16
	Payload []byte
}

// Error is a negative acknowledgement from the kernel. It unwraps to the
// errno, so errors.Is(err, unix.EEXIST) works.
type Error struct {
	Errno unix.Errno
	Msg   string // the kernel's extended-ack text, if any
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return e.Errno.Error() + " (" + e.Msg + ")"
	}
	return e.Errno.Error()
}

func (e *Error) Unwrap() error { return e.Errno }

// Execute sends one request (NLM_F_REQUEST|NLM_F_ACK are added to flags)
// and returns the data messages of the reply, up to the final ACK or DONE.
// A NACK comes back as *Error.
func (c *Conn) Execute(typ, flags uint16, payload []byte) ([]Message, error) {
	if c.fd < 0 {
		return nil, os.ErrClosed
	}
	c.seq++
	seq := c.seq
	msg := make([]byte, unix.NLMSG_HDRLEN+len(payload))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags|unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	copy(msg[unix.NLMSG_HDRLEN:], payload)
	if err := unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto", err)
	}
	var out []Message
	for {
		n, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, os.NewSyscallError("recvfrom", err)
		}
		var done bool
		if out, done, err = parseReplies(out, c.buf[:n], seq); err != nil || done {
			return out, err
		}
	}
}

// parseReplies appends to out the data messages of one received datagram
// b that answer request seq, copied out of b, and says whether the reply
// is complete (an ACK or DONE came). On a NACK or a malformed message it
// returns a nil slice and the error.
func parseReplies(out []Message, b []byte, seq uint32) ([]Message, bool, error) {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := binary.NativeEndian.Uint32(b[0:])
		if l < unix.NLMSG_HDRLEN || uint64(l) > uint64(len(b)) {
			return nil, true, fmt.Errorf("netlink: malformed message length %d", l)
		}
		mtyp := binary.NativeEndian.Uint16(b[4:])
		mflags := binary.NativeEndian.Uint16(b[6:])
		mseq := binary.NativeEndian.Uint32(b[8:])
		body := b[unix.NLMSG_HDRLEN:l]
		b = b[min(align4(int(l)), len(b)):]
		if mseq != seq {
			continue // a stale reply to an earlier request
		}
		switch mtyp {
		case unix.NLMSG_ERROR:
			if err := parseAck(mflags, body); err != nil {
				return nil, true, err
			}
			return out, true, nil // a positive ACK ends the exchange
		case unix.NLMSG_DONE:
			if len(body) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(body)); e < 0 {
					return nil, true, &Error{Errno: unix.Errno(-e)}
				}
			}
			return out, true, nil
		case unix.NLMSG_NOOP, unix.NLMSG_OVERRUN:
			continue
		}
		out = append(out, Message{Type: mtyp, Flags: mflags, Payload: append([]byte(nil), body...)})
	}
	return out, false, nil
}

// parseAck decodes the body of an NLMSG_ERROR message: nil for an ACK.
func parseAck(flags uint16, body []byte) error {
	if len(body) < 4+unix.NLMSG_HDRLEN {
		return fmt.Errorf("netlink: short error message (%d bytes)", len(body))
	}
	code := int32(binary.NativeEndian.Uint32(body))
	if code == 0 {
		return nil
	}
	e := &Error{Errno: unix.Errno(-code)}
	if flags&unix.NLM_F_ACK_TLVS == 0 {
		return e
	}
	// The TLVs follow the echoed request: its header only when capped.
	off := 4 + unix.NLMSG_HDRLEN
	if flags&unix.NLM_F_CAPPED == 0 {
		l := binary.NativeEndian.Uint32(body[4:]) // the echoed nlmsg_len
		if uint64(l) > uint64(len(body)-4) {      // not int: past 2^31 that wraps on 32-bit
			return e
		}
		off = 4 + int(l)
	}
	for _, a := range ParseAttrs(body[off:]) {
		if a.Type == unix.NLMSGERR_ATTR_MSG {
			e.Msg = a.String()
		}
	}
	return e
}
