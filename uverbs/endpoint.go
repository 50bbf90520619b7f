package uverbs

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/goverbs/goverbs/internal/errs"
)

// Endpoint is what one side of a connection tells the other: its QP
// number, the packet sequence number its send queue starts at, its LID
// (InfiniBand; 0 on RoCE) and GID, and optionally the path MTU it can
// take and a memory region the peer may access (Addr, RKey). How the two
// sides exchange it is the application's choice; its text form is
// ibv_rc_pingpong's.
//
// [QP.ConnectRC] and [QP.ConnectUD] take the local and remote Endpoints.
type Endpoint struct {
	LID uint16
	QPN uint32 // 24 bits
	PSN uint32 // 24 bits
	GID GID
	// MTU is the largest path MTU this side takes; 0 if it does not say.
	MTU MTU
	// Addr and RKey name a memory region the peer may read or write with
	// RDMA (MR.Addr, MR.RKey); zero if there is none.
	Addr uint64
	RKey uint32
}

// EndpointTextLen is the length of an Endpoint's text in ibv_rc_pingpong's
// form, "LID:QPN:PSN:GID" (ibv_rc_pingpong sends it as a 52-byte C string:
// this, and a NUL).
const EndpointTextLen = len("0000:000000:000000:00000000000000000000000000000000")

// AppendText appends the text of MarshalText to b.
func (e Endpoint) AppendText(b []byte) ([]byte, error) {
	if e.QPN > 0xffffff || e.PSN > 0xffffff {
		return b, fmt.Errorf("endpoint: QPN %#x or PSN %#x wider than 24 bits: %w", e.QPN, e.PSN, syscall.EINVAL)
	}
	if e.MTU != 0 && e.MTU.Bytes() == 0 {
		return b, fmt.Errorf("endpoint: %v is not an MTU: %w", e.MTU, syscall.EINVAL)
	}
	b = appendHex(b, uint64(e.LID), 4)
	b = append(b, ':')
	b = appendHex(b, uint64(e.QPN), 6)
	b = append(b, ':')
	b = appendHex(b, uint64(e.PSN), 6)
	b = append(b, ':')
	b = hex.AppendEncode(b, e.GID[:])
	if e.MTU == 0 && e.Addr == 0 && e.RKey == 0 {
		return b, nil
	}
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(e.MTU.Bytes()), 10)
	b = append(b, ':')
	b = appendHex(b, e.Addr, 16)
	b = append(b, ':')
	return appendHex(b, uint64(e.RKey), 8), nil
}

// appendHex appends v in lower-case hex, zero-padded to width digits.
func appendHex(b []byte, v uint64, width int) []byte {
	var d [16]byte
	s := strconv.AppendUint(d[:0], v, 16)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// MarshalText gives the endpoint in ibv_rc_pingpong's form,
// "%04x:%06x:%06x:%s" of LID, QPN, PSN and the GID's 16 bytes in hex
// ("0000:000011:abcdef:fe800000000000000000000000000001"), which
// ibv_rc_pingpong and ibv_ud_pingpong read. An endpoint with an MTU, Addr
// or RKey has three more fields: the MTU in bytes (decimal, 0 if none),
// Addr in 16 hex digits and RKey in 8
// ("…:1024:00007f0000001000:00001234"). A QPN or PSN wider than 24 bits,
// or an MTU that is not one, is an error.
func (e Endpoint) MarshalText() ([]byte, error) {
	return e.AppendText(make([]byte, 0, EndpointTextLen+1+4+1+16+1+8))
}

// String gives the text of MarshalText, or the error's.
func (e Endpoint) String() string {
	b, err := e.MarshalText()
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// UnmarshalText reads an endpoint in either form MarshalText writes. The
// text ends at its first NUL, if any (ibv_rc_pingpong's message is a C
// string); hex digits may be upper case; the GID has exactly 32 digits.
func (e *Endpoint) UnmarshalText(text []byte) error {
	s := string(text)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	bad := func(err error) error {
		if err == nil {
			err = syscall.EINVAL
		}
		return fmt.Errorf("endpoint: bad text %s: %w", errs.Quote(s), err)
	}
	f := strings.Split(s, ":")
	if (len(f) != 4 && len(f) != 7) || len(f[3]) != 32 {
		return bad(nil)
	}
	lid, err1 := strconv.ParseUint(f[0], 16, 16)
	qpn, err2 := strconv.ParseUint(f[1], 16, 24)
	psn, err3 := strconv.ParseUint(f[2], 16, 24)
	g, err4 := hex.DecodeString(f[3])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return bad(err)
	}
	d := Endpoint{LID: uint16(lid), QPN: uint32(qpn), PSN: uint32(psn), GID: GID(g)}
	if len(f) == 7 {
		mtu, err1 := strconv.ParseUint(f[4], 10, 16)
		addr, err2 := strconv.ParseUint(f[5], 16, 64)
		rkey, err3 := strconv.ParseUint(f[6], 16, 32)
		if err := errors.Join(err1, err2, err3); err != nil {
			return bad(err)
		}
		if mtu != 0 {
			if d.MTU = mtuOfBytes(int(mtu)); d.MTU == 0 {
				return bad(fmt.Errorf("MTU %d: %w", mtu, syscall.EINVAL))
			}
		}
		d.Addr, d.RKey = addr, uint32(rkey)
	}
	*e = d
	return nil
}

// mtuOfBytes is the MTU of n bytes, or 0 if n is not one.
func mtuOfBytes(n int) MTU {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m
		}
	}
	return 0
}

// ConnectOptions tune [QP.ConnectRC], [QP.ConnectUD] and [PD.NewAHTo].
// A nil *ConnectOptions, or a zero field, takes the default, which is
// what ibv_rc_pingpong and perftest use unless said otherwise. A value
// whose zero is meaningful (a retry count of 0, say) cannot be asked for
// here: use [QP.Modify] for that.
type ConnectOptions struct {
	// Port is the device port to use: default 1.
	Port uint8
	// PKeyIndex is the P_Key table index: 0 is the default, and the only
	// entry on RoCE.
	PKeyIndex uint16
	// Access is what the peer may do to this QP's memory (RC and UC):
	// default AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|
	// AccessRemoteAtomic on RC, AccessLocalWrite|AccessRemoteWrite on UC
	// (perftest's); each MR's own rights still apply. Give
	// AccessLocalWrite alone for no remote access.
	Access Access
	// PathMTU is the connection's MTU (RC and UC): default the smaller of
	// the two Endpoints' MTUs, else the port's active MTU.
	PathMTU MTU
	// GIDIndex is the source GID index. When 0, the local Endpoint's GID
	// is looked up in the port's GID table (see GIDType), so no program
	// needs to know an index; a nonzero index is used as it is.
	GIDIndex int
	// GIDType picks among GID table entries with the local GID when the
	// lookup finds several (RoCE lists each GID as v1 and as v2): default
	// RoCE v2.
	GIDType GIDType
	// HopLimit, TrafficClass, FlowLabel and SL go into the address
	// vector; HopLimit defaults to 64 (ibv_rc_pingpong's 1 stops at the
	// first router).
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
	SL           uint8
	// MaxRdAtomic and MaxDestRdAtomic bound the RDMA reads and atomics in
	// flight as initiator and as target (RC): default 1.
	MaxRdAtomic, MaxDestRdAtomic uint8
	// MinRNRTimer is the RNR NAK delay this side asks of its peer (RC):
	// default 12 (0.64 ms).
	MinRNRTimer uint8
	// Timeout is the local ACK timeout, 4.096 µs·2^Timeout (RC): default 14
	// (about 67 ms).
	Timeout uint8
	// RetryCnt and RNRRetry are the retries after a timeout and after an
	// RNR NAK (RC): default 7 (7 RNR retries: forever).
	RetryCnt, RNRRetry uint8
	// QKey is the UD QP's Q_Key: default 0x11111111 (ibv_ud_pingpong's).
	QKey uint32
}

// DefaultQKey is the Q_Key ConnectUD gives a UD QP unless told otherwise.
const DefaultQKey = 0x11111111

// withDefaults returns the options with every zero field at its
// default; qt picks the access default.
func (o *ConnectOptions) withDefaults(qt QPType) ConnectOptions {
	var r ConnectOptions
	if o != nil {
		r = *o
	}
	def := func(p *uint8, v uint8) {
		if *p == 0 {
			*p = v
		}
	}
	def(&r.Port, 1)
	def(&r.HopLimit, 64)
	def(&r.MaxRdAtomic, 1)
	def(&r.MaxDestRdAtomic, 1)
	def(&r.MinRNRTimer, 12)
	def(&r.Timeout, 14)
	def(&r.RetryCnt, 7)
	def(&r.RNRRetry, 7)
	if r.Access == 0 {
		r.Access = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
		if qt == UC {
			r.Access = AccessLocalWrite | AccessRemoteWrite
		}
	}
	if r.GIDType == 0 {
		r.GIDType = GIDTypeRoCEv2
	}
	if r.QKey == 0 {
		r.QKey = DefaultQKey
	}
	return r
}

// GRHSize is the room a UD receive needs for the global route header in
// front of the payload: the device writes the GRH (or, for RoCE v2 over
// IPv4, 20 undefined bytes and the IPv4 header) into the first 40 bytes
// of every UD receive buffer, whether or not the sender sent one.
const GRHSize = 40

// UDRecvSize returns the bytes a UD receive buffer needs for a payload of
// n bytes: GRHSize + n.
func UDRecvSize(n int) int { return GRHSize + n }

// GRH is the global route header of a UD receive, as [ParseGRH] reads it
// from the first GRHSize bytes of the receive buffer (where cq.WC's Flags
// have cq.WithGRH).
type GRH struct {
	// IPVersion is 6 for a GRH (InfiniBand, RoCE v1) or RoCE v2 over
	// IPv6, and 4 for RoCE v2 over IPv4.
	IPVersion    int
	TrafficClass uint8 // the IPv4 TOS for IPVersion 4
	FlowLabel    uint32
	HopLimit     uint8 // the IPv4 TTL for IPVersion 4
	// SGID and DGID are the source and destination GIDs; for IPv4, the
	// IPv4-mapped GIDs (::ffff:a.b.c.d) of the addresses.
	SGID, DGID GID
}

// Src returns the sender's address: the source GID as an IPv6 address,
// or the IPv4 address for IPVersion 4 (and any IPv4-mapped GID).
func (g GRH) Src() netip.Addr { return g.SGID.Addr().Unmap() }

// Dst returns the destination address, as Src does.
func (g GRH) Dst() netip.Addr { return g.DGID.Addr().Unmap() }

// ParseGRH reads the global route header in the first GRHSize bytes of a
// UD receive buffer. Like rdma-core's ibv_init_ah_from_wc it tells an
// IPv6-style GRH from RoCE v2's IPv4 header (in bytes 20 to 40) by the
// version nibbles and, where both could be, the IPv4 header's checksum.
// A buffer shorter than GRHSize, or one that is neither, is an error
// wrapping EINVAL or EPROTONOSUPPORT.
func ParseGRH(b []byte) (GRH, error) {
	if len(b) < GRHSize {
		return GRH{}, fmt.Errorf("GRH: %d bytes, need %d: %w", len(b), GRHSize, syscall.EINVAL)
	}
	b = b[:GRHSize]
	ip4 := b[20:40]
	v4 := false
	switch b[0] >> 4 {
	case 6:
		// An IPv4 header of 5 words with a good checksum is RoCE v2 over
		// IPv4; anything else is a GRH.
		v4 = ip4[0] == 0x45 && ipv4Checksum(ip4) == binary.BigEndian.Uint16(ip4[10:12])
	default:
		if ip4[0]>>4 != 4 {
			return GRH{}, fmt.Errorf("GRH: version %d, and no IPv4 header: %w", b[0]>>4, syscall.EPROTONOSUPPORT)
		}
		v4 = true
	}
	if v4 {
		g := GRH{IPVersion: 4, TrafficClass: ip4[1], HopLimit: ip4[8]}
		g.SGID = GID(netip.AddrFrom4([4]byte(ip4[12:16])).As16())
		g.DGID = GID(netip.AddrFrom4([4]byte(ip4[16:20])).As16())
		return g, nil
	}
	w := binary.BigEndian.Uint32(b[0:4])
	return GRH{
		IPVersion:    6,
		TrafficClass: uint8(w >> 20),
		FlowLabel:    w & 0xfffff,
		HopLimit:     b[7],
		SGID:         GID(b[8:24]),
		DGID:         GID(b[24:40]),
	}, nil
}

// ipv4Checksum is the header checksum of the 20-byte IPv4 header h, with
// its checksum field taken as zero.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < 20; i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
