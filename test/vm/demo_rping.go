package main

import (
	"fmt"
	"strings"

	"github.com/goverbs/goverbs/test/vm/internal/plan"
)

// demoRping runs goverbs rping against rdma-core's rping over rxe0's
// 192.0.2.1, each as server and as client: 100 pings through the RDMA
// connection manager, RDMA READ and WRITE, the client verifying (-V) and
// printing (-v) each.
func demoRping(libPath string) []plan.Step {
	ours := []string{"/bin/goverbs", "rping"}
	theirs := []string{"/usr/bin/rping"}
	sides := demoSides{ours[0], libPath}
	var steps []plan.Step
	port := 7174
	for _, dir := range []struct{ server, client []string }{{ours, theirs}, {theirs, ours}} {
		port++
		flags := []string{"-a", "192.0.2.1", "-p", fmt.Sprint(port)}
		srv := append(append(append([]string{}, dir.server...), "-s"), flags...)
		cli := append(append(append([]string{}, dir.client...), "-c"), flags...)
		cli = append(cli, "-C", "100", "-V", "-v")
		steps = append(steps,
			plan.Step{Name: fmt.Sprintf("rping: %s server", sides.name(srv)), Argv: srv, LibPath: sides.lib(srv),
				Background: true, Prefix: fmt.Sprintf("  rping %s server| ", sides.name(srv)), TimeoutSec: 120},
			plan.Step{Name: fmt.Sprintf("rping: %s client", sides.name(cli)), Argv: cli, LibPath: sides.lib(cli),
				DelayMs: 1000, Prefix: fmt.Sprintf("  rping %s client| ", sides.name(cli)), TimeoutSec: 120})
	}
	return steps
}

// demoRpingSummary says how the rping steps went, and whether all four
// sides finished.
func demoRpingSummary(res *vmResult) bool {
	ok := 0
	for _, st := range res.Steps {
		if strings.HasPrefix(st.Name, "rping") && st.RC == 0 {
			ok++
		}
	}
	fmt.Printf("  - rping over the RDMA connection manager (RDMA READ and WRITE), goverbs against rdma-core's rping,\n")
	fmt.Printf("    each as server and client: %d of 4 sides finished 100 verified pings.\n", ok)
	for _, l := range res.Console {
		if strings.Contains(l, "rping") && strings.Contains(l, "client| ping data: rdma-ping-99:") {
			fmt.Println("     ", strings.Replace(strings.TrimSpace(l), "|", ":", 1))
		}
	}
	return ok == 4
}

// demoSides tells a demo's two programs apart: goverbs' (ours, a static
// binary) and rdma-core's, which runs with the guest's libraries.
type demoSides struct{ ours, libPath string }

func (d demoSides) name(argv []string) string {
	if argv[0] == d.ours {
		return "goverbs"
	}
	return "rdma-core"
}

func (d demoSides) lib(argv []string) string {
	if argv[0] == d.ours {
		return ""
	}
	return d.libPath
}
