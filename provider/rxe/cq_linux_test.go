package rxe

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uapi"
)

// rxe writes the kernel's enum ib_wc_flags, not libibverbs' IBV_WC_*:
// WITH_INVALIDATE is 4 there and IP_CSUM_OK 8, the reverse of ours.
func TestConvertWCFlags(t *testing.T) {
	imm := func(v uint32, be bool) (b [4]byte) {
		if be {
			binary.BigEndian.PutUint32(b[:], v)
		} else {
			binary.NativeEndian.PutUint32(b[:], v)
		}
		return b
	}
	tests := []struct {
		name string
		in   uapi.IBUverbsWC
		want cq.WC
	}{
		{"receive with immediate, GRH",
			uapi.IBUverbsWC{WRID: 1, Opcode: 128, ByteLen: 140, Ex: imm(0xdeadbeef, true), QPNum: 17, SrcQP: 18,
				WCFlags: kwcGRH | kwcWithImm},
			cq.WC{WRID: 1, Opcode: cq.OpRecv, ByteLen: 140, Imm: 0xdeadbeef, QPNum: 17, SrcQP: 18, Flags: cq.WithGRH | cq.WithImm}},
		{"receive with invalidate: the kernel's 4 is our WithInv (8)",
			uapi.IBUverbsWC{WRID: 2, Opcode: 128, Ex: imm(0x1234, false), WCFlags: kwcWithInvalidate},
			cq.WC{WRID: 2, Opcode: cq.OpRecv, Imm: 0x1234, Flags: cq.WithInv}},
		{"checksum ok: the kernel's 8 is our IPCsumOK (4)",
			uapi.IBUverbsWC{WRID: 3, Opcode: 128, WCFlags: kwcIPCsumOK},
			cq.WC{WRID: 3, Opcode: cq.OpRecv, Flags: cq.IPCsumOK}},
		{"flags we do not report are dropped",
			uapi.IBUverbsWC{WRID: 4, Opcode: 0, WCFlags: 1 << 4 /* WITH_SMAC */},
			cq.WC{WRID: 4, Opcode: cq.OpSend}},
		{"an error completion keeps only wr_id, status, vendor_err, qp_num",
			uapi.IBUverbsWC{WRID: 5, Status: uint32(cq.WRFlushErr), Opcode: 128, VendorErr: 9, ByteLen: 77,
				QPNum: 3, SrcQP: 4, WCFlags: kwcGRH, PkeyIndex: 1},
			cq.WC{WRID: 5, Status: cq.WRFlushErr, VendorErr: 9, QPNum: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got cq.WC
			convertWC(&got, &tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzConvertWC(f *testing.F) {
	f.Add(uint64(1), uint32(0), uint32(128), uint32(7), uint32(6))
	f.Fuzz(func(t *testing.T, wrid uint64, status, opcode, flags, ex uint32) {
		var in uapi.IBUverbsWC
		in.WRID, in.Status, in.Opcode, in.WCFlags = wrid, status, opcode, flags
		binary.NativeEndian.PutUint32(in.Ex[:], ex)
		var w cq.WC
		convertWC(&w, &in)
		if w.WRID != wrid || uint32(w.Status) != status {
			t.Fatalf("wr_id or status lost: %+v", w)
		}
		if status != 0 && (w.Flags != 0 || w.Imm != 0 || w.Opcode != 0) {
			t.Fatalf("an error completion carries more than the man page allows: %+v", w)
		}
	})
}
