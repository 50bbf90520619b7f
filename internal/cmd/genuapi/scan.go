package main

import (
	"fmt"
	"regexp"
	"strings"
)

// The scanner finds names in a header's text: object-like #defines, enum
// members and struct/union tags. It never works out a value; the C
// compiler does that (see cprog.go).

// A constGroup is the #defines of one header, or the members of one enum,
// in source order.
type constGroup struct {
	header string // "rdma/ib_user_verbs.h"
	enum   string // "enum rdma_driver_id", "enum" for an anonymous one, "" for #defines
	names  []string
	text   map[string]string // name → the source text of its value ("" when implicit)
}

// A tagDef is a struct or union defined in a header.
type tagDef struct {
	header string
	kind   string // "struct" or "union"
	tag    string
	ptrs   []string // members declared with RDMA_UAPI_PTR
}

var (
	reBlockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	reLineComment  = regexp.MustCompile(`//[^\n]*`)
	reDefine       = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\(?)(.*)$`)
	rePreproc      = regexp.MustCompile(`(?m)^[ \t]*#.*$`)
	reEnum         = regexp.MustCompile(`\benum\s*(\w*)\s*\{([^{}]*)\}`)
	reMember       = regexp.MustCompile(`(?s)^([A-Za-z_]\w*)\s*(?:=\s*(.*))?$`)
	reTag          = regexp.MustCompile(`\b(struct|union)\s+(\w+)\s*\{`)
	reUAPIPtr      = regexp.MustCompile(`\bRDMA_UAPI_PTR\s*\([^;]*,\s*(\w+)\s*\)\s*;`)
)

// clean removes comments (keeping line breaks, so that error positions
// stay meaningful) and joins continued lines.
func clean(src string) string {
	src = reBlockComment.ReplaceAllStringFunc(src, func(c string) string {
		return strings.Repeat("\n", strings.Count(c, "\n")) + " "
	})
	src = reLineComment.ReplaceAllString(src, "")
	return strings.ReplaceAll(src, "\\\n", " ")
}

// scan returns the constant groups and the tags that header h defines.
func scan(h header, src string) ([]constGroup, []tagDef, error) {
	src = clean(src)
	var groups []constGroup

	defs := constGroup{header: h.path, text: map[string]string{}}
	for _, m := range reDefine.FindAllStringSubmatch(src, -1) {
		name, paren, val := m[1], m[2], strings.TrimSpace(m[3])
		if paren != "" || val == "" { // function-like, or an include guard
			continue
		}
		defs.names = append(defs.names, name)
		defs.text[name] = val
	}
	if len(defs.names) > 0 {
		groups = append(groups, defs)
	}

	code := rePreproc.ReplaceAllString(src, "")
	for _, m := range reEnum.FindAllStringSubmatch(code, -1) {
		g := constGroup{header: h.path, enum: strings.TrimSpace("enum " + m[1]), text: map[string]string{}}
		for _, member := range splitTop(m[2]) {
			member = strings.TrimSpace(member)
			if member == "" {
				continue
			}
			mm := reMember.FindStringSubmatch(member)
			if mm == nil {
				return nil, nil, fmt.Errorf("%s: %s: cannot read enum member %q", h.path, g.enum, member)
			}
			g.names = append(g.names, mm[1])
			g.text[mm[1]] = strings.Join(strings.Fields(mm[2]), " ")
		}
		groups = append(groups, g)
	}

	var tags []tagDef
	for _, loc := range reTag.FindAllStringSubmatchIndex(code, -1) {
		t := tagDef{header: h.path, kind: code[loc[2]:loc[3]], tag: code[loc[4]:loc[5]]}
		body := code[loc[1]:]
		depth := 1
		for i, r := range body {
			if r == '{' {
				depth++
			} else if r == '}' {
				if depth--; depth == 0 {
					body = body[:i]
					break
				}
			}
		}
		for _, m := range reUAPIPtr.FindAllStringSubmatch(body, -1) {
			t.ptrs = append(t.ptrs, m[1])
		}
		tags = append(tags, t)
	}
	return groups, tags, nil
}

// splitTop splits s at the commas that are outside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}
