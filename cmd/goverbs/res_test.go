package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseRes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // kind dev port allPorts filters, as resCmdString writes them
		err  string // a part of the error; "" for none
	}{
		{"summary", nil, "summary  0 all []", ""},
		{"show", []string{"show"}, "summary  0 all []", ""},
		{"show device", []string{"show", "rxe0"}, "summary rxe0 0 all []", ""},
		{"abbreviated show", []string{"sh", "mlx5_0"}, "summary mlx5_0 0 all []", ""},
		{"qp", []string{"show", "qp"}, "qp  0 all []", ""},
		{"qp without show", []string{"qp"}, "qp  0 all []", ""},
		{"list cq", []string{"list", "cq"}, "cq  0 all []", ""},
		{"c is cm_id", []string{"show", "c"}, "cm_id  0 all []", ""},
		{"qp link", []string{"show", "qp", "link", "rxe0/1"}, "qp rxe0 1 one [{link rxe0/1}]", ""},
		{"qp link device", []string{"show", "qp", "link", "rxe0"}, "qp rxe0 0 all [{link rxe0}]", ""},
		{"qp link slash", []string{"show", "qp", "link", "rxe0/"}, "qp rxe0 0 all [{link rxe0/}]", ""},
		{"qp link no port", []string{"show", "qp", "link", "rxe0/-"}, "qp rxe0 0 one [{link rxe0/-}]", ""},
		{"filters lower-cased", []string{"show", "qp", "type", "RC", "state", "RTS,Init"}, "qp  0 all [{type rc} {state rts,init}]", ""},
		{"abbreviated filter", []string{"show", "qp", "ty", "UD", "l", "rxe0/1"}, "qp rxe0 1 one [{type ud} {link rxe0/1}]", ""},
		{"p is pid", []string{"show", "qp", "p", "7"}, "qp  0 all [{pid 7}]", ""},
		{"number lists", []string{"show", "qp", "lqpn", "1,3-5"}, "qp  0 all [{lqpn 1,3-5}]", ""},
		{"dev", []string{"show", "pd", "dev", "Mlx5_0", "pdn", "3"}, "pd Mlx5_0 0 all [{dev Mlx5_0} {pdn 3}]", ""},
		{"first dev counts", []string{"show", "mr", "dev", "a", "dev", "b"}, "mr a 0 all [{dev a} {dev b}]", ""},
		{"help", []string{"help"}, "help", ""},
		{"show help", []string{"show", "help"}, "help", ""},
		{"srq", []string{"show", "srq"}, "", "srq is not supported"},
		{"unknown object", []string{"show", "foo", "bar"}, "", `unknown object "foo"`},
		{"odd filters", []string{"show", "qp", "lqpn"}, "", `filter "lqpn" needs a value`},
		{"unknown filter", []string{"show", "qp", "dev", "rxe0"}, "", `res qp: unknown filter "dev"`},
		{"link of a device kind", []string{"show", "cq", "link", "rxe0"}, "", `res cq: unknown filter "link"`},
		{"not a number", []string{"show", "qp", "lqpn", "x1"}, "", "filter lqpn takes numbers"},
		{"empty value", []string{"show", "qp", "type", ""}, "", "empty value"},
		{"port 0", []string{"show", "qp", "link", "rxe0/0"}, "", "bad port"},
		{"bad port", []string{"show", "cm_id", "link", "rxe0/x"}, "", "bad port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRes(tc.args)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			case tc.err == "":
				if s := resCmdString(got); s != tc.want {
					t.Errorf("got %s, want %s", s, tc.want)
				}
			}
		})
	}
}

func resCmdString(c resCmd) string {
	if c.help {
		return "help"
	}
	kind, ports := "summary", "one"
	if c.kind != nil {
		kind = c.kind.name
	}
	if c.allPorts {
		ports = "all"
	}
	var fs []string
	for _, f := range c.filters {
		fs = append(fs, "{"+f.key+" "+f.value+"}")
	}
	return fmt.Sprintf("%s %s %d %s [%s]", kind, c.dev, c.port, ports, strings.Join(fs, " "))
}

func TestNumMatch(t *testing.T) {
	for _, tc := range []struct {
		spec string
		in   []uint64
		out  []uint64
	}{
		{"5", []uint64{5}, []uint64{4, 6, 0, 50}},
		{"3,5", []uint64{3, 5}, []uint64{4, 35}},
		{"2-6", []uint64{2, 3, 6}, []uint64{1, 7}},
		{"1,4-6,9", []uint64{1, 4, 5, 6, 9}, []uint64{2, 3, 7, 8, 10}},
		{",7,", []uint64{7}, []uint64{0}},
		{"-3", []uint64{1, 2, 3}, []uint64{0, 4}}, // from 0, 0 itself left out, as in rdma
		{"9-", []uint64{9}, []uint64{10}},
		{"99999999999999999999999", []uint64{1<<64 - 1}, []uint64{0}},
	} {
		for _, v := range tc.in {
			if !numMatch(tc.spec, v) {
				t.Errorf("%q does not take %d", tc.spec, v)
			}
		}
		for _, v := range tc.out {
			if numMatch(tc.spec, v) {
				t.Errorf("%q takes %d", tc.spec, v)
			}
		}
	}
}

func TestResFilters(t *testing.T) {
	fs := resFilters{{"type", "rc,ud"}, {"lqpn", "17"}, {"type", "uc"}}
	for _, tc := range []struct {
		drop bool
		got  bool
	}{
		{false, fs.dropStr("type", "RC")},
		{false, fs.dropStr("type", "UD")},
		{true, fs.dropStr("type", "UC")}, // the first type filter counts
		{true, fs.dropStr("type", "R")},
		{false, fs.dropStr("state", "RTS")}, // no state filter
		{false, fs.dropNum("lqpn", 17, true)},
		{true, fs.dropNum("lqpn", 18, true)},
		{true, fs.dropNum("lqpn", 17, false)}, // filtered on, and not reported
		{false, fs.dropNum("pdn", 0, false)},
	} {
		if tc.got != tc.drop {
			t.Errorf("case %+v", tc)
		}
	}
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want statCmd
		err  string
	}{
		{nil, statCmd{}, ""},
		{[]string{"show"}, statCmd{}, ""},
		{[]string{"list", "link"}, statCmd{}, ""},
		{[]string{"show", "link", "rxe0"}, statCmd{dev: "rxe0"}, ""},
		{[]string{"s", "l", "rxe0/1"}, statCmd{dev: "rxe0", port: 1}, ""},
		{[]string{"link", "mlx5_1/2"}, statCmd{dev: "mlx5_1", port: 2}, ""},
		{[]string{"help"}, statCmd{help: true}, ""},
		{[]string{"qp", "show"}, statCmd{}, "stat qp: not supported"},
		{[]string{"mode"}, statCmd{}, "stat mode: not supported"},
		{[]string{"show", "link", "rxe0/0"}, statCmd{}, "bad port"},
		{[]string{"show", "link", "rxe0/x"}, statCmd{}, "bad port"},
		{[]string{"show", "link", "a", "b"}, statCmd{}, "too many arguments"},
		{[]string{"show", "foo"}, statCmd{}, `unknown argument "foo"`},
	} {
		got, err := parseStat(tc.args)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: error %v", tc.args, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one saying %q", tc.args, err, tc.err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%q: got %+v, want %+v", tc.args, got, tc.want)
		}
	}
}
