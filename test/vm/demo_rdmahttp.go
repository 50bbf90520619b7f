package main

import (
	"fmt"
	"strings"

	"github.com/goverbs/goverbs/test/vm/internal/plan"
)

// demoRdmahttpGuest is where examples/rdmahttp lies in the demo's guest.
const demoRdmahttpGuest = "/bin/rdmahttp"

// demoRdmahttp runs examples/rdmahttp over rxe0's 192.0.2.1, the demo's
// last step: an http.Server on an rdmanet Listener answers one GET from
// an http.Client that dials rdmanet, and the program prints the response.
func demoRdmahttp() []plan.Step {
	return []plan.Step{{Name: "rdmahttp: GET over rdmanet", Argv: []string{demoRdmahttpGuest, "-a", "192.0.2.1:0", "-n", "0"},
		Prefix: "  rdmahttp| ", TimeoutSec: 120}}
}

// demoRdmahttpSummary says how the HTTP request over RDMA went, with the
// response the program printed, and whether it succeeded.
func demoRdmahttpSummary(res *vmResult) bool {
	ok := false
	for _, st := range res.Steps {
		if strings.HasPrefix(st.Name, "rdmahttp") && st.RC == 0 {
			ok = true
		}
	}
	verdict := "answered"
	if !ok {
		verdict = "FAILED"
	}
	fmt.Printf("  - net/http over RDMA (examples/rdmahttp, package rdmanet): an http.Server on an rdmanet Listener,\n")
	fmt.Printf("    an http.Client dialing rdmanet, over an RC connection on rxe0: one GET, %s:\n", verdict)
	for _, l := range res.Console {
		if _, resp, found := strings.Cut(l, "rdmahttp| "); found && strings.TrimSpace(resp) != "" {
			fmt.Println("     ", strings.TrimRight(resp, " \r"))
		}
	}
	return ok
}
