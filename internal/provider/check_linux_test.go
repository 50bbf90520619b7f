package provider

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uapi"
)

type fakeAH struct{}

func (fakeAH) Handle() uint32 { return 1 }
func (fakeAH) Destroy() error { return nil }

func TestCheckSend(t *testing.T) {
	const rc, uc, ud = uapi.IB_UVERBS_QPT_RC, uapi.IB_UVERBS_QPT_UC, uapi.IB_UVERBS_QPT_UD
	sge := func(n uint32) []SGE { return []SGE{{Addr: 0x1000, Length: n, LKey: 1}} }
	mw1, mw2, bound2 := &MWRef{Type: 1}, &MWRef{Type: 2}, &MWRef{Type: 2}
	bound2.Bound.Store(true)
	mr := &MRRef{LKey: 1, IOVA: 0x1000, Length: 4096, Access: accessLocalWrite | accessMWBind}
	for _, tc := range []struct {
		name string
		typ  uint8
		wr   SendWR
		want error // nil, EINVAL or EOPNOTSUPP
		len  uint64
	}{
		{"send", rc, SendWR{Opcode: WRSend, SGL: sge(100)}, nil, 100},
		{"too many SGEs", rc, SendWR{Opcode: WRSend, SGL: make([]SGE, 3)}, unix.EINVAL, 0},
		{"over 2 GiB", rc, SendWR{Opcode: WRSend, SGL: []SGE{{Length: 1 << 31}, {Length: 1}}}, unix.EINVAL, 0},
		{"inline too long", rc, SendWR{Opcode: WRSend, Flags: SendInline, SGL: sge(65)}, unix.EINVAL, 0},
		{"inline", rc, SendWR{Opcode: WRSend, Flags: SendInline, SGL: sge(64)}, nil, 64},
		{"UD send without AH", ud, SendWR{Opcode: WRSend, SGL: sge(8)}, unix.EINVAL, 0},
		{"UD send", ud, SendWR{Opcode: WRSendWithImm, SGL: sge(8), AH: &AHRef{fakeAH{}}}, nil, 8},
		{"UD write", ud, SendWR{Opcode: WRRDMAWrite, SGL: sge(8)}, unix.EINVAL, 0},
		{"UC write", uc, SendWR{Opcode: WRRDMAWriteWithImm, SGL: sge(8)}, nil, 8},
		{"UC read", uc, SendWR{Opcode: WRRDMARead, SGL: sge(8)}, unix.EINVAL, 0},
		{"read", rc, SendWR{Opcode: WRRDMARead, SGL: sge(8)}, nil, 8},
		{"inline read", rc, SendWR{Opcode: WRRDMARead, Flags: SendInline, SGL: sge(8)}, unix.EINVAL, 0},
		{"UC atomic", uc, SendWR{Opcode: WRAtomicFetchAdd, SGL: sge(8)}, unix.EINVAL, 0},
		{"atomic", rc, SendWR{Opcode: WRAtomicCmpSwp, SGL: sge(8), RemoteAddr: 16}, nil, 8},
		{"atomic short", rc, SendWR{Opcode: WRAtomicCmpSwp, SGL: sge(4), RemoteAddr: 16}, unix.EINVAL, 0},
		{"atomic unaligned", rc, SendWR{Opcode: WRAtomicFetchAdd, SGL: sge(8), RemoteAddr: 12}, unix.EINVAL, 0},
		{"atomic inline", rc, SendWR{Opcode: WRAtomicFetchAdd, Flags: SendInline, SGL: sge(8), RemoteAddr: 8}, unix.EINVAL, 0},
		{"local invalidate", rc, SendWR{Opcode: WRLocalInv, Bind: &MWBindRef{MW: bound2}}, nil, 0},
		{"local invalidate without a window", rc, SendWR{Opcode: WRLocalInv, Imm: 0x100}, unix.EINVAL, 0},
		{"local invalidate of an unbound window", rc, SendWR{Opcode: WRLocalInv, Bind: &MWBindRef{MW: mw2}}, unix.EINVAL, 0},
		{"local invalidate of a type-1 window", rc, SendWR{Opcode: WRLocalInv, Bind: &MWBindRef{MW: mw1}}, unix.EINVAL, 0},
		{"UC local invalidate", uc, SendWR{Opcode: WRLocalInv, Bind: &MWBindRef{MW: bound2}}, unix.EINVAL, 0},
		{"local invalidate with data", rc, SendWR{Opcode: WRLocalInv, SGL: sge(8), Bind: &MWBindRef{MW: bound2}}, unix.EINVAL, 0},
		{"bind of a bound type-2 window", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: bound2, MR: mr, Addr: 0x1000, Length: 8}}, unix.EINVAL, 0},
		{"bind without window", rc, SendWR{Opcode: WRBindMW}, unix.EINVAL, 0},
		{"bind", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw2, MR: mr, Addr: 0x1000, Length: 4096, Access: accessRemoteWrite}}, nil, 0},
		{"UC bind", uc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw2, MR: mr, Addr: 0x1000, Length: 8}}, nil, 0},
		{"UD bind", ud, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw2, MR: mr, Addr: 0x1000, Length: 8}}, unix.EINVAL, 0},
		{"bind with data", rc, SendWR{Opcode: WRBindMW, SGL: sge(8), Bind: &MWBindRef{MW: mw2, MR: mr, Addr: 0x1000, Length: 8}}, unix.EINVAL, 0},
		{"bind past the MR", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw2, MR: mr, Addr: 0x1001, Length: 4096}}, unix.EINVAL, 0},
		{"bind below the MR", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw2, MR: mr, Addr: 0xfff, Length: 1}}, unix.EINVAL, 0},
		{"bind longer than the MR", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw2, MR: mr, Addr: 0x1000, Length: 1 << 63}}, unix.EINVAL, 0},
		{"bind to an MR without MW_BIND", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw2, MR: &MRRef{IOVA: 0x1000, Length: 4096, Access: accessLocalWrite}, Addr: 0x1000, Length: 8}}, unix.EINVAL, 0},
		{"remote write on a read-only MR", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw2, MR: &MRRef{IOVA: 0x1000, Length: 4096, Access: accessMWBind}, Addr: 0x1000, Length: 8, Access: accessRemoteWrite}}, unix.EINVAL, 0},
		{"zero-based window", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw2, MR: mr, Addr: 0x1000, Length: 8, Access: accessZeroBased}}, unix.EINVAL, 0},
		{"type-2 bind of 0 bytes", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw2, MR: mr, Addr: 0x1000}}, unix.EINVAL, 0},
		{"type-2 unbind", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw2}}, unix.EINVAL, 0},
		{"type-1 unbind", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw1}}, nil, 0},
		{"type-1 bind of bytes without an MR", rc, SendWR{Opcode: WRBindMW, Bind: &MWBindRef{MW: mw1, Length: 8}}, unix.EINVAL, 0},
		{"atomic write", rc, SendWR{Opcode: WRAtomicWrite, RemoteAddr: 16, Swap: 7}, nil, 8},
		{"UC atomic write", uc, SendWR{Opcode: WRAtomicWrite, RemoteAddr: 16}, unix.EINVAL, 0},
		{"UD atomic write", ud, SendWR{Opcode: WRAtomicWrite, RemoteAddr: 16}, unix.EINVAL, 0},
		{"atomic write unaligned", rc, SendWR{Opcode: WRAtomicWrite, RemoteAddr: 20}, unix.EINVAL, 0},
		{"atomic write with an SGE", rc, SendWR{Opcode: WRAtomicWrite, SGL: sge(8), RemoteAddr: 16}, unix.EINVAL, 0},
		{"atomic write inline", rc, SendWR{Opcode: WRAtomicWrite, Flags: SendInline, RemoteAddr: 16}, unix.EINVAL, 0},
		{"flush of a range", rc, SendWR{Opcode: WRFlush, Imm: 4096, FlushType: FlushGlobal}, nil, 4096},
		{"flush of an MR", rc, SendWR{Opcode: WRFlush, FlushType: FlushGlobal | FlushPersistent, FlushLevel: FlushMR}, nil, 0},
		{"UC flush", uc, SendWR{Opcode: WRFlush, FlushType: FlushGlobal}, unix.EINVAL, 0},
		{"UD flush", ud, SendWR{Opcode: WRFlush, FlushType: FlushGlobal}, unix.EINVAL, 0},
		{"flush of no type", rc, SendWR{Opcode: WRFlush}, unix.EINVAL, 0},
		{"flush of type 4", rc, SendWR{Opcode: WRFlush, FlushType: 4}, unix.EINVAL, 0},
		{"flush of level 2", rc, SendWR{Opcode: WRFlush, FlushType: FlushGlobal, FlushLevel: 2}, unix.EINVAL, 0},
		{"flush with data", rc, SendWR{Opcode: WRFlush, FlushType: FlushGlobal, SGL: sge(8)}, unix.EINVAL, 0},
		{"unknown opcode", rc, SendWR{Opcode: 99}, unix.EOPNOTSUPP, 0},
	} {
		n, err := CheckSend(&tc.wr, tc.typ, 2, 64)
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		case tc.want == nil && n != tc.len:
			t.Errorf("%s: length %d, want %d", tc.name, n, tc.len)
		}
	}
}

// TestPlainSendOps holds PlainSendOps to CheckSend: every opcode it names
// passes CheckSend with any SGE count up to the cap and any length up to
// MaxSendLength, and every opcode it leaves out fails or has a request
// of that kind that does (atomics: a short one; UD sends: one without an
// address handle).
func TestPlainSendOps(t *testing.T) {
	types := []uint8{uapi.IB_UVERBS_QPT_RC, uapi.IB_UVERBS_QPT_UC, uapi.IB_UVERBS_QPT_UD}
	for _, typ := range types {
		plain := PlainSendOps(typ)
		for op := uint32(0); op < 40; op++ {
			wrs := []SendWR{
				{Opcode: op},
				{Opcode: op, SGL: []SGE{{Addr: 0x1000, Length: 4, LKey: 1}}},
				{Opcode: op, SGL: []SGE{{Length: MaxSendLength - 1}, {Length: 1}}},
			}
			failed := false
			for i := range wrs {
				_, err := CheckSend(&wrs[i], typ, 2, 64)
				if err != nil {
					failed = true
					if plain>>op&1 != 0 {
						t.Errorf("QP type %d, opcode %d in PlainSendOps: request %d: %v", typ, op, i, err)
					}
				}
			}
			if plain>>op&1 == 0 && !failed {
				t.Errorf("QP type %d, opcode %d: CheckSend takes all, PlainSendOps leaves it out", typ, op)
			}
		}
	}
}
