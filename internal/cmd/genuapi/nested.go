package main

import (
	"fmt"
	"strings"
)

// nestedOffsets are offsets of members inside unions and nested structs,
// which the generated structs keep as bytes: the providers address them by
// these constants, taken from the C compiler like everything else.
var nestedOffsets = []struct{ goName, ctype, member string }{
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
	{"OffsetRxeSendWqeImmData", "struct rxe_send_wqe", "wr.ex.imm_data"},
	{"OffsetRxeSendWqeDmaSGE", "struct rxe_send_wqe", "dma.sge"},
	{"OffsetRxeSendWqeDmaInlineData", "struct rxe_send_wqe", "dma.inline_data"},
	{"OffsetRxeRecvWqeDmaSGE", "struct rxe_recv_wqe", "dma.sge"},
}

// nestedProgram is the C that prints them, one "nested NAME VALUE" line each.
func nestedProgram() string {
	var b strings.Builder
	for _, n := range nestedOffsets {
		fmt.Fprintf(&b, "\tprintf(\"nested %s %%zu\\n\", offsetof(%s, %s));\n", n.goName, n.ctype, n.member)
	}
	return b.String()
}

// nestedSource is the Go file of the nested offsets.
func nestedSource(origin string, vals map[string]uint64) string {
	var b strings.Builder
	b.WriteString(genHeader("//", origin))
	b.WriteString("\npackage uapi\n\n// Offsets of members inside unions and nested structs, from offsetof.\nconst (\n")
	for _, n := range nestedOffsets {
		fmt.Fprintf(&b, "\t%s = %d // offsetof(%s, %s)\n", n.goName, vals[n.goName], n.ctype, n.member)
	}
	b.WriteString(")\n")
	return b.String()
}
