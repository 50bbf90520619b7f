package main

import "strings"

// goWords are the words of a C identifier that are not simply capitalised
// when it becomes a Go name: initialisms go upper case, as elsewhere in
// goverbs (QPNum, RegMR, GIDIndex). The list is part of uapi's API: code
// outside uapi spells these names, so keep it in step with uapi/doc.go.
var goWords = map[string]string{
	"ib":    "IB",
	"cq":    "CQ",
	"qp":    "QP",
	"pd":    "PD",
	"mr":    "MR",
	"mw":    "MW",
	"ah":    "AH",
	"wc":    "WC",
	"wr":    "WR",
	"gid":   "GID",
	"srq":   "SRQ",
	"wq":    "WQ",
	"uar":   "UAR",
	"xrcd":  "XRCD",
	"id":    "ID",
	"qpn":   "QPN",
	"psn":   "PSN",
	"mtu":   "MTU",
	"lid":   "LID",
	"sge":   "SGE",
	"dm":    "DM",
	"dv":    "DV",
	"ex":    "Ex",
	"cqe":   "CQE",
	"cqe64": "CQE64",
	"uidx":  "UIDX",
	"bf":    "BF",
	"mmap":  "Mmap",
	"fd":    "FD",
	"rdma":  "RDMA",
	"ucm":   "UCM",
}

// goName turns a C struct tag or member name into a Go name: split on '_',
// replace the words in goWords, capitalise the others, join.
// "ib_uverbs_create_cq_resp" becomes "IBUverbsCreateCQResp", "wr_id" "WRID".
func goName(c string) string {
	var b strings.Builder
	for _, w := range strings.Split(c, "_") {
		if w == "" {
			continue
		}
		if g, ok := goWords[strings.ToLower(w)]; ok {
			b.WriteString(g)
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]))
		b.WriteString(w[1:])
	}
	return b.String()
}
