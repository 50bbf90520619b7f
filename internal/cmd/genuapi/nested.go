package main

import (
	"fmt"
	"strings"
)

// A nestedOffset is a Go constant for offsetof(ctype, member).
type nestedOffset struct{ goName, ctype, member string }

// nestedOffsets are offsets of members inside unions and nested structs,
// which the generated structs keep as bytes: the providers address them by
// these constants, taken from the C compiler like everything else.
var nestedOffsets = []nestedOffset{
	{"OffsetRxeSendWqeWRUnion", "struct rxe_send_wqe", "wr.wr"},
	{"OffsetRxeSendWqeRDMARemoteAddr", "struct rxe_send_wqe", "wr.wr.rdma.remote_addr"},
	{"OffsetRxeSendWqeRDMARKey", "struct rxe_send_wqe", "wr.wr.rdma.rkey"},
	{"OffsetRxeSendWqeAtomicRemoteAddr", "struct rxe_send_wqe", "wr.wr.atomic.remote_addr"},
	{"OffsetRxeSendWqeAtomicCompareAdd", "struct rxe_send_wqe", "wr.wr.atomic.compare_add"},
	{"OffsetRxeSendWqeAtomicSwap", "struct rxe_send_wqe", "wr.wr.atomic.swap"},
	{"OffsetRxeSendWqeAtomicRKey", "struct rxe_send_wqe", "wr.wr.atomic.rkey"},
	{"OffsetRxeSendWqeUDRemoteQPN", "struct rxe_send_wqe", "wr.wr.ud.remote_qpn"},
	{"OffsetRxeSendWqeUDRemoteQKey", "struct rxe_send_wqe", "wr.wr.ud.remote_qkey"},
	{"OffsetRxeSendWqeUDPKeyIndex", "struct rxe_send_wqe", "wr.wr.ud.pkey_index"},
	{"OffsetRxeSendWqeUDAHNum", "struct rxe_send_wqe", "wr.wr.ud.ah_num"},
	{"OffsetRxeSendWqeMWAddr", "struct rxe_send_wqe", "wr.wr.mw.addr"},
	{"OffsetRxeSendWqeMWLength", "struct rxe_send_wqe", "wr.wr.mw.length"},
	{"OffsetRxeSendWqeMWMRLKey", "struct rxe_send_wqe", "wr.wr.mw.mr_lkey"},
	{"OffsetRxeSendWqeMWRKey", "struct rxe_send_wqe", "wr.wr.mw.mw_rkey"},
	{"OffsetRxeSendWqeMWNewRKey", "struct rxe_send_wqe", "wr.wr.mw.rkey"},
	{"OffsetRxeSendWqeMWAccess", "struct rxe_send_wqe", "wr.wr.mw.access"},
	{"OffsetRxeSendWqeImmData", "struct rxe_send_wqe", "wr.ex.imm_data"},
	{"OffsetRxeSendWqeInvalidateRKey", "struct rxe_send_wqe", "wr.ex.invalidate_rkey"},
	{"OffsetRxeSendWqeDmaSGE", "struct rxe_send_wqe", "dma.sge"},
	{"OffsetRxeSendWqeDmaInlineData", "struct rxe_send_wqe", "dma.inline_data"},
	{"OffsetRxeRecvWqeDmaSGE", "struct rxe_recv_wqe", "dma.sge"},
}

// mlx5dvNestedOffsets are those of mlx5dv.h: the address vector's key
// is a union of the UD queue key (with a reserved word) and the DC key.
var mlx5dvNestedOffsets = []nestedOffset{
	{"OffsetMlx5WqeAvQkey", "struct mlx5_wqe_av", "key.qkey.qkey"},
	{"OffsetMlx5WqeAvDcKey", "struct mlx5_wqe_av", "key.dc_key"},
}

// nestedProgram is the C that prints them, one "nested NAME VALUE" line each.
func nestedProgram(nested []nestedOffset) string {
	var b strings.Builder
	for _, n := range nested {
		fmt.Fprintf(&b, "\tprintf(\"nested %s %%zu\\n\", offsetof(%s, %s));\n", n.goName, n.ctype, n.member)
	}
	return b.String()
}

// nestedSource is the Go file of the nested offsets.
func nestedSource(origin string, nested []nestedOffset, vals map[string]uint64) string {
	return genHeader("//", origin) + "\npackage uapi\n" + nestedDecls(nested, vals)
}

// nestedDecls declares the nested offsets.
func nestedDecls(nested []nestedOffset, vals map[string]uint64) string {
	var b strings.Builder
	b.WriteString("\n// Offsets of members inside unions and nested structs, from offsetof.\nconst (\n")
	for _, n := range nested {
		fmt.Fprintf(&b, "\t%s = %d // offsetof(%s, %s)\n", n.goName, vals[n.goName], n.ctype, n.member)
	}
	b.WriteString(")\n")
	return b.String()
}
