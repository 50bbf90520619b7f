package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// The res subcommand shows what iproute2's "rdma resource show" shows,
// through RDMA netlink, in the same text, line for line: the summary of
// every device, or the QPs, cm_ids, CQs, MRs, PDs or contexts, with the
// filters rdma takes for them (iproute2 6.1). Left out: SRQs, -j, -d
// (driver details) and -r (raw). The Linux half is res_linux.go.

func init() { register("res", "RDMA objects the kernel tracks, like rdma resource show", res) }

func res(args []string) int { return resTo(os.Stdout, os.Stderr, args) }

const resUsage = `usage: goverbs res [show] [DEV]                     objects of each kind, per device
       goverbs res [show] qp|cm_id [link DEV[/PORT]] [FILTER VALUE]...
       goverbs res [show] cq|mr|pd|ctx [dev DEV] [FILTER VALUE]...
filters (as rdma resource show's; numbers take lists and ranges, 3,5-7):
  qp     lqpn rqpn pid sq-psn rq-psn type path-mig-state state pdn
  cm_id  lqpn qp-type state ps dev-type transport-type pid src-addr src-port dst-addr dst-port cm-idn
  cq     users poll-ctx pid cqn ctxn
  mr     rkey lkey mrlen pid mrn pdn
  pd     users pid ctxn pdn
  ctx    pid ctxn`

// resFilterSpec is one filter a kind takes: its name and whether its
// value is numeric (digits, commas and dashes).
type resFilterSpec struct {
	name    string
	numeric bool
}

// resKind is one kind of object res shows.
type resKind struct {
	name string
	// link says the objects belong to ports and are chosen by "link
	// DEV[/PORT]"; the others belong to devices ("dev DEV").
	link bool
	// filters are rdma's for this kind, in its order, which decides what
	// an abbreviated name means; the first is link or dev.
	filters []resFilterSpec
}

// resKinds are the kinds in rdma's order, which decides what an
// abbreviated kind means ("c" is cm_id).
var resKinds = []resKind{
	{"qp", true, []resFilterSpec{{"link", false}, {"lqpn", true}, {"rqpn", true}, {"pid", true},
		{"sq-psn", true}, {"rq-psn", true}, {"type", false}, {"path-mig-state", false}, {"state", false}, {"pdn", true}}},
	// dev-type and transport-type are accepted and, as in rdma, match
	// nothing the kernel reports: they filter nothing.
	{"cm_id", true, []resFilterSpec{{"link", false}, {"lqpn", true}, {"qp-type", false}, {"state", false},
		{"ps", false}, {"dev-type", false}, {"transport-type", false}, {"pid", true}, {"src-addr", false},
		{"src-port", true}, {"dst-addr", false}, {"dst-port", true}, {"cm-idn", true}}},
	{"cq", false, []resFilterSpec{{"dev", false}, {"users", true}, {"poll-ctx", false}, {"pid", true},
		{"cqn", true}, {"ctxn", true}}},
	{"mr", false, []resFilterSpec{{"dev", false}, {"rkey", true}, {"lkey", true}, {"mrlen", true},
		{"pid", true}, {"mrn", true}, {"pdn", true}}},
	{"pd", false, []resFilterSpec{{"dev", false}, {"users", true}, {"pid", true}, {"ctxn", true}, {"pdn", true}}},
	{"ctx", false, []resFilterSpec{{"dev", false}, {"pid", true}, {"ctxn", true}}},
}

// matchWord returns the first of words that arg begins, as rdma matches
// its keywords: "l" is list, "sh" show.
func matchWord(arg string, words ...string) (string, bool) {
	if arg == "" {
		return "", false
	}
	for _, w := range words {
		if strings.HasPrefix(w, arg) {
			return w, true
		}
	}
	return "", false
}

// resFilter is one FILTER VALUE pair: the filter's full name and the
// value, lower-cased as rdma lower-cases it.
type resFilter struct {
	key, value string
}

// resFilters are a command line's filters, in its order.
type resFilters []resFilter

// get returns the value of the first filter named key.
func (fs resFilters) get(key string) (string, bool) {
	for _, f := range fs {
		if f.key == key {
			return f.value, true
		}
	}
	return "", false
}

// dropNum says whether a numeric filter named key leaves out an object
// whose attribute is v (present says whether the kernel reported it: an
// object without it is left out once the filter is given).
func (fs resFilters) dropNum(key string, v uint64, present bool) bool {
	spec, ok := fs.get(key)
	if !ok {
		return false
	}
	return !present || !numMatch(spec, v)
}

// dropStr says whether a string filter named key leaves out an object
// whose attribute reads s. The value is a comma-separated list, matched
// without regard to case. An absent attribute reads as its zero value's
// name, as in rdma.
func (fs resFilters) dropStr(key, s string) bool {
	spec, ok := fs.get(key)
	if !ok {
		return false
	}
	for _, w := range strings.Split(spec, ",") {
		if w != "" && strings.EqualFold(w, s) {
			return false
		}
	}
	return true
}

// numMatch says whether v is among spec's numbers and ranges: "5",
// "3,5", "2-6" (both ends included), "1,4-6,9".
func numMatch(spec string, v uint64) bool {
	var last, left uint64 // the number read last; a range's left end
	inRange := false
	for i := 0; i < len(spec); {
		if spec[i] < '0' || spec[i] > '9' {
			if spec[i] == '-' {
				left, inRange = last, true
			}
			i++
			continue
		}
		j := i
		for j < len(spec) && spec[j] >= '0' && spec[j] <= '9' {
			j++
		}
		last, _ = strconv.ParseUint(spec[i:j], 10, 64) // past 2^64 it is the maximum
		if v == last || (inRange && left < v && v < last) {
			return true
		}
		inRange = false
		i = j
	}
	return false
}

// resCmd is a parsed res command line.
type resCmd struct {
	help bool
	kind *resKind // nil for the summary
	dev  string   // the device named, or "" for every one
	// port is the port of link DEV/PORT; allPorts says every port of DEV
	// is shown, from 0 (the objects that have none yet) up.
	port     uint32
	allPorts bool
	filters  resFilters
}

// parseRes reads res's arguments as "rdma resource" takes them.
func parseRes(args []string) (resCmd, error) {
	c := resCmd{allPorts: true}
	if len(args) > 0 {
		switch w, _ := matchWord(args[0], "show", "list", "help"); w {
		case "help":
			return resCmd{help: true}, nil
		case "show", "list":
			args = args[1:]
		}
	}
	if len(args) == 0 {
		return c, nil
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		return resCmd{help: true}, nil
	}
	names := make([]string, len(resKinds))
	for i, k := range resKinds {
		names[i] = k.name
	}
	name, ok := matchWord(args[0], names...)
	if !ok && args[0] == "srq" {
		return c, fmt.Errorf("res: srq is not supported (have %s)", strings.Join(names, ", "))
	}
	if !ok {
		if len(args) == 1 { // "rdma resource show DEV": the summary of one device
			c.dev = args[0]
			return c, nil
		}
		return c, fmt.Errorf("res: unknown object %q (have %s)", args[0], strings.Join(names, ", "))
	}
	for i := range resKinds {
		if resKinds[i].name == name {
			c.kind = &resKinds[i]
		}
	}
	rest := args[1:]
	if len(rest)%2 != 0 {
		return c, fmt.Errorf("res %s: filter %q needs a value", name, rest[len(rest)-1])
	}
	for ; len(rest) > 0; rest = rest[2:] {
		f, err := c.kind.filter(rest[0], rest[1])
		if err != nil {
			return c, err
		}
		c.filters = append(c.filters, f)
	}
	// The first link or dev filter chooses the device and port.
	if c.kind.link {
		if v, ok := c.filters.get("link"); ok {
			return c, c.parseLink(v)
		}
	} else if v, ok := c.filters.get("dev"); ok {
		c.dev = v
	}
	return c, nil
}

// filter checks one FILTER VALUE pair of kind k.
func (k *resKind) filter(key, value string) (resFilter, error) {
	names := make([]string, len(k.filters))
	for i, s := range k.filters {
		names[i] = s.name
	}
	name, ok := matchWord(key, names...)
	if !ok {
		return resFilter{}, fmt.Errorf("res %s: unknown filter %q (have %s)", k.name, key, strings.Join(names, ", "))
	}
	for _, s := range k.filters {
		if s.name == name && s.numeric && strings.Trim(value, "0123456789,-") != "" {
			return resFilter{}, fmt.Errorf("res %s: filter %s takes numbers, commas and dashes, not %q", k.name, name, value)
		}
	}
	if value == "" {
		return resFilter{}, fmt.Errorf("res %s: filter %s has an empty value", k.name, name)
	}
	if name == "link" || name == "dev" {
		return resFilter{name, value}, nil // a device name keeps its case
	}
	return resFilter{name, strings.ToLower(value)}, nil
}

// parseLink reads link's DEV, DEV/PORT or DEV/- (the objects that have
// no port yet).
func (c *resCmd) parseLink(v string) error {
	i := strings.LastIndexByte(v, '/')
	if i < 0 || i == len(v)-1 { // "rxe0" or "rxe0/": every port
		c.dev = strings.TrimSuffix(v, "/")
		return nil
	}
	c.dev, c.allPorts = v[:i], false
	if v[i+1:] == "-" {
		return nil
	}
	p, err := strconv.ParseUint(v[i+1:], 10, 32)
	if err != nil || p == 0 {
		return fmt.Errorf("res %s: bad port in link %q (DEV, DEV/PORT from 1, or DEV/-)", c.kind.name, v)
	}
	c.port = uint32(p)
	return nil
}

// resUsageError reports a usage error and returns exit status 2.
func resUsageError(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "goverbs: %v\n%s\n", err, resUsage)
	return 2
}
