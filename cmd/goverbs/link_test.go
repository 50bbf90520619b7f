package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLink(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want linkCmd
		err  string // a part of the error; "" for none
	}{
		{"nothing shows", nil, linkCmd{op: "show"}, ""},
		{"show", []string{"show"}, linkCmd{op: "show"}, ""},
		{"show device", []string{"show", "rxe0"}, linkCmd{op: "show", name: "rxe0"}, ""},
		{"show port", []string{"list", "rxe0/1"}, linkCmd{op: "show", name: "rxe0", port: 1}, ""},
		{"show bad port", []string{"show", "rxe0/x"}, linkCmd{}, `bad port in "rxe0/x"`},
		{"show port 0", []string{"show", "rxe0/0"}, linkCmd{}, "bad port"},
		{"show two", []string{"show", "a", "b"}, linkCmd{}, "too many arguments"},
		{"add", []string{"add", "rxe1", "type", "rxe", "netdev", "eth0"}, linkCmd{op: "add", name: "rxe1", typ: "rxe", netdev: "eth0"}, ""},
		{"add reordered", []string{"add", "siw0", "netdev", "eth0", "type", "siw"}, linkCmd{op: "add", name: "siw0", typ: "siw", netdev: "eth0"}, ""},
		{"add no name", []string{"add"}, linkCmd{}, "missing NAME"},
		{"add no netdev", []string{"add", "rxe1", "type", "rxe"}, linkCmd{}, "needs type TYPE and netdev IF"},
		{"add dangling", []string{"add", "rxe1", "type"}, linkCmd{}, `"type" needs a value`},
		{"add unknown", []string{"add", "rxe1", "kind", "rxe"}, linkCmd{}, `unknown keyword "kind"`},
		{"add empty name", []string{"add", "", "type", "rxe", "netdev", "eth0"}, linkCmd{}, "empty NAME"},
		{"del", []string{"del", "rxe1"}, linkCmd{op: "del", name: "rxe1"}, ""},
		{"delete", []string{"delete", "rxe1"}, linkCmd{op: "del", name: "rxe1"}, ""},
		{"del none", []string{"del"}, linkCmd{}, "exactly one NAME"},
		{"del two", []string{"delete", "a", "b"}, linkCmd{}, "exactly one NAME"},
		{"unknown", []string{"set"}, linkCmd{}, `unknown command "set"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLink(tc.args)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			case tc.err == "":
				if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(linkCmd{})); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestLinkUsageError(t *testing.T) {
	var b strings.Builder
	if status := linkUsageError(&b, errors.New(`link: unknown command "set"`)); status != 2 {
		t.Errorf("status %d, want 2", status)
	}
	if !strings.HasPrefix(b.String(), "goverbs: link: unknown command \"set\"\nusage: goverbs link add") {
		t.Errorf("wrote %q", b.String())
	}
}

func TestLinkLine(t *testing.T) {
	for _, tc := range []struct {
		dev         string
		port        uint32
		state, phys uint8
		netdev      string
		want        string
	}{
		{"rxe0", 1, 4, 5, "d0", "link rxe0/1 state ACTIVE physical_state LINK_UP netdev d0"},
		{"rxe1", 1, 1, 3, "eth1", "link rxe1/1 state DOWN physical_state DISABLED netdev eth1"},
		{"mlx5_0", 2, 2, 2, "", "link mlx5_0/2 state INIT physical_state POLLING"},
		{"x", 1, 6, 12, "", "link x/1 state UNKNOWN physical_state UNKNOWN"},
		{"opa", 1, 5, 11, "", "link opa/1 state ACTIVE_DEFER physical_state OPA_TEST"},
	} {
		if got := linkLine(tc.dev, tc.port, tc.state, tc.phys, tc.netdev); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestHintLink(t *testing.T) {
	for msg, want := range map[string]string{
		"rdma link add r type rxe netdev x: no such device":                    "ip link show",
		"rdma link add r type foo netdev d0: invalid argument":                 "modprobe rdma_rxe",
		"rdma link add r type rxe netdev d0: file exists":                      "goverbs link show",
		"rdma link add rxe0 type rxe netdev d1: too many open files in system": "the name is taken",
		"rdma link add r type rxe netdev d0: operation not permitted":          "run as root",
		"rdma link delete r: no such RDMA device: no such device":              "goverbs link show lists them",
		"rdma link delete mlx5_0: invalid argument":                            "only software devices",
		"open nosuch: no such RDMA device (have: rxe0): no such device":        "create a soft-RoCE device",
		"rdma link show: socket: protocol not supported":                       "modprobe ib_core",
	} {
		if got := hint(msg); !strings.Contains(got, want) {
			t.Errorf("hint(%q) = %q, want %q in it", msg, got, want)
		}
	}
	// internal/netlink's own advice is not repeated.
	if got := hint("rdma link show: socket: protocol not supported (is the ib_core module loaded?)"); got != "" {
		t.Errorf("hint repeats internal/netlink's advice: %q", got)
	}
	var b strings.Builder
	if status := failTo(&b, "rdma link add %s type rxe netdev %s: %s", "r", "x", "no such device"); status != 1 {
		t.Errorf("failTo returned %d, want 1", status)
	}
	if want := "goverbs: rdma link add r type rxe netdev x: no such device (no network device of that name: ip link show)\n"; b.String() != want {
		t.Errorf("failTo wrote %q, want %q", b.String(), want)
	}
}
