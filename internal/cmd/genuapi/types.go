package main

import (
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Structs come from the DWARF that gcc writes for the headers (as cgo
// -godefs does internally), so that genuapi sees every member's type and
// offset as the compiler laid it out. Every Go struct spells out its
// padding as _ fields: Go then never pads on its own, and the same
// declaration has the C layout on every GOARCH whose C layout is x86-64's.

// A mirror is one C struct or union and its Go type.
type mirror struct {
	kind, tag, header string
	goName            string
	size              int64
	align             int64    // of the Go type, on 64-bit
	union             string   // for a union: its Go type ([N]byte) and
	doc               string   //   a line describing its members
	fields            []field  // for a struct
	trailer           []string // comments on dropped flexible arrays
	layout            []entry  // every named member C and Go both reach
}

// A field is one Go struct field.
type field struct {
	name    string // Go name, "_" for padding
	typ     gotype
	off     int64
	comment string
	lead    string   // a comment line before it
	c       []string // the C members it stands for
	decl    string   // its C declaration, for comments
}

// An entry pairs a C member designator (offsetof's second argument) with
// the Go expression for the same offset.
type entry struct {
	c    string
	expr string
}

// A gotype is a Go type expression with its size and 64-bit alignment.
type gotype struct {
	expr  string
	size  int64
	align int64
	note  string  // a comment for the field ("__be32", the members of a union)
	inner []field // for an inline struct type: its fields
}

type typeBuilder struct {
	tags    map[string]*tagDef // the tags to mirror
	done    map[string]*mirror
	dw      map[string]*dwarf.StructType
	busy    map[string]bool
	pointer gotype
}

// readDWARF returns every complete struct and union in the object, by "kind tag".
func readDWARF(path string) (map[string]*dwarf.StructType, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		return nil, err
	}
	out := map[string]*dwarf.StructType{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			return out, nil
		}
		if e.Tag != dwarf.TagStructType && e.Tag != dwarf.TagUnionType {
			continue
		}
		if decl, _ := e.Val(dwarf.AttrDeclaration).(bool); decl {
			continue
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		if name == "" {
			continue
		}
		t, err := d.Type(e.Offset)
		if err != nil {
			return nil, err
		}
		st, ok := t.(*dwarf.StructType)
		if !ok {
			return nil, fmt.Errorf("%s: DWARF type %T", name, t)
		}
		out[st.Kind+" "+name] = st
	}
}

// mirrorOf builds the Go type for struct or union tag t.
func (b *typeBuilder) mirrorOf(t *tagDef) (*mirror, error) {
	key := t.kind + " " + t.tag
	if m := b.done[key]; m != nil {
		return m, nil
	}
	if b.busy[key] {
		return nil, fmt.Errorf("%s contains itself", key)
	}
	b.busy[key] = true
	st := b.dw[key]
	if st == nil || st.Incomplete {
		return nil, fmt.Errorf("%s (%s): not in the compiler's debug information", key, t.header)
	}
	m := &mirror{kind: t.kind, tag: t.tag, header: t.header, goName: goName(t.tag), size: st.ByteSize}
	if t.kind == "union" {
		m.union = fmt.Sprintf("[%d]byte", st.ByteSize)
		m.doc = unionDoc(st)
		m.align = 1
	} else {
		fields, dropped, err := b.fields(st, t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		m.fields = fields
		m.align = alignOf(fields)
		for _, f := range fields {
			for _, c := range f.c {
				m.layout = append(m.layout, entry{c, m.offsetExpr(f.name)})
			}
			for _, in := range f.typ.inner {
				if in.typ.inner != nil {
					return nil, fmt.Errorf("%s: %s.%s: inline structs nest too deep", key, f.c[0], in.c[0])
				}
				for _, c := range in.c {
					m.layout = append(m.layout, entry{
						f.c[0] + "." + c,
						m.offsetExpr(f.name) + " + " + m.offsetExpr(f.name+"."+in.name),
					})
				}
			}
		}
		for _, d := range dropped {
			// Go pads a struct whose last field has size zero, so a
			// trailing flexible array cannot be a field: name where it starts.
			if d.off != st.ByteSize {
				return nil, fmt.Errorf("%s: flexible array %s at %d, not at the end (%d)", key, d.c[0], d.off, st.ByteSize)
			}
			for _, c := range d.c {
				m.layout = append(m.layout, entry{c, fmt.Sprintf("unsafe.Sizeof(%s{})", m.goName)})
			}
			m.trailer = append(m.trailer, fmt.Sprintf("Then %s: a flexible array, at unsafe.Sizeof(%s{}).", d.decl, m.goName))
		}
	}
	b.done[key] = m
	delete(b.busy, key)
	return m, nil
}

func (m *mirror) offsetExpr(sel string) string {
	return fmt.Sprintf("unsafe.Offsetof(%s{}.%s)", m.goName, sel)
}

func alignOf(fields []field) int64 {
	a := int64(1)
	for _, f := range fields {
		a = max(a, f.typ.align)
	}
	return a
}

// fields lays out the Go fields of struct st (of tag t, nil for an inline
// struct): the members, flattened and unions resolved, then explicit
// padding. Trailing members of size zero come back apart, as dropped.
func (b *typeBuilder) fields(st *dwarf.StructType, t *tagDef) (fields, dropped []field, err error) {
	members, err := b.members(st, 0, t)
	if err != nil {
		return nil, nil, err
	}
	for len(members) > 0 && members[len(members)-1].typ.size == 0 {
		dropped = append([]field{members[len(members)-1]}, dropped...)
		members = members[:len(members)-1]
	}
	var off int64
	seen := map[string]bool{}
	for _, f := range members {
		if f.off < off {
			return nil, nil, fmt.Errorf("member %s at %d overlaps the one before (ends at %d)", f.c[0], f.off, off)
		}
		if f.off%f.typ.align != 0 && f.typ.inner == nil && reScalar.MatchString(f.typ.expr) {
			// A member of a packed struct: Go has no unaligned integer,
			// so it is its bytes.
			f.typ.expr = fmt.Sprintf("[%d]byte", f.typ.size)
			f.typ.align = 1
			f.typ.note = strings.TrimPrefix(f.typ.note+", unaligned", ", ")
			f.comment = f.typ.note
		}
		if f.off%f.typ.align != 0 {
			return nil, nil, fmt.Errorf("member %s at %d is not %d-aligned", f.c[0], f.off, f.typ.align)
		}
		if seen[f.name] {
			return nil, nil, fmt.Errorf("two members become Go field %s", f.name)
		}
		seen[f.name] = true
		if f.off > off {
			fields = append(fields, pad(off, f.off-off))
		}
		fields = append(fields, f)
		off = f.off + f.typ.size
	}
	if off < st.ByteSize {
		fields = append(fields, pad(off, st.ByteSize-off))
	}
	return fields, dropped, nil
}

func pad(off, n int64) field {
	return field{name: "_", off: off, typ: gotype{expr: fmt.Sprintf("[%d]byte", n), size: n, align: 1}}
}

// members returns st's members as Go fields at their offsets (plus base):
// anonymous structs are flattened, an anonymous union becomes its first
// member that fills it, which also stands for the others.
func (b *typeBuilder) members(st *dwarf.StructType, base int64, t *tagDef) ([]field, error) {
	var out []field
	for _, m := range st.Field {
		if m.BitSize != 0 || m.DataBitOffset != 0 || m.BitOffset != 0 {
			return nil, fmt.Errorf("bit field %s", m.Name)
		}
		off := base + m.ByteOffset
		m = unwrapFlex(m)
		if m.Name != "" {
			f, err := b.member(m, off, t)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
			continue
		}
		sub, ok := m.Type.(*dwarf.StructType)
		if !ok {
			return nil, fmt.Errorf("anonymous member of type %s", m.Type)
		}
		if sub.Kind == "struct" {
			fs, err := b.members(sub, off, t)
			if err != nil {
				return nil, err
			}
			out = append(out, fs...)
			continue
		}
		var rep *dwarf.StructField
		var names []string
		for _, u := range sub.Field {
			if u = unwrapFlex(u); u.Name == "" {
				continue
			}
			names = append(names, u.Name)
			if rep == nil && u.Type.Size() == sub.ByteSize {
				rep = u
			}
		}
		if rep == nil {
			// An anonymous struct that fills the union, beside named
			// members that do not: its members become fields, the
			// others a comment.
			fs, others, err := b.anonStructFilling(sub, off, t)
			if err != nil {
				return nil, err
			}
			if len(fs) > 0 {
				fs[0].lead = fmt.Sprintf("%s to %s share a union with %s.", fs[0].c[0], fs[len(fs)-1].c[0], strings.Join(others, ", "))
				out = append(out, fs...)
				continue
			}
			return nil, fmt.Errorf("anonymous union at %d: no named member fills it", off)
		}
		f, err := b.member(rep, off, t)
		if err != nil {
			return nil, err
		}
		f.c = names
		f.comment = unionDoc(sub)
		f.decl = f.comment
		out = append(out, f)
	}
	return out, nil
}

// anonStructFilling returns the fields of the anonymous struct that fills
// union u (at off), if it has one, and the C declarations of u's other
// members.
func (b *typeBuilder) anonStructFilling(u *dwarf.StructType, off int64, t *tagDef) (fs []field, others []string, err error) {
	var fill *dwarf.StructField
	for _, m := range u.Field {
		st, ok := m.Type.(*dwarf.StructType)
		if fill == nil && m.Name == "" && ok && st.Kind == "struct" && st.StructName == "" && st.ByteSize == u.ByteSize {
			fill = m
			continue
		}
		others = append(others, cDecl(m.Type, m.Name))
	}
	if fill == nil {
		return nil, nil, nil
	}
	if fs, err = b.members(fill.Type.(*dwarf.StructType), off+fill.ByteOffset, t); err != nil {
		return nil, nil, err
	}
	return fs, others, nil
}

var reScalar = regexp.MustCompile(`^u?int(8|16|32|64)$`)

// unwrapFlex returns the flexible array that the kernel's
// __DECLARE_FLEX_ARRAY(T, name) wraps, so that it can sit in a union:
// struct { struct { } __empty_name; T name[]; }. Other members it returns
// as they are.
func unwrapFlex(m *dwarf.StructField) *dwarf.StructField {
	st, ok := m.Type.(*dwarf.StructType)
	if m.Name != "" || !ok || st.Kind != "struct" || st.StructName != "" || len(st.Field) != 2 {
		return m
	}
	empty, flex := st.Field[0], st.Field[1]
	if a, ok := flex.Type.(*dwarf.ArrayType); !ok || a.Count > 0 || empty.Name != "__empty_"+flex.Name || empty.Type.Size() != 0 {
		return m
	}
	u := *flex
	u.ByteOffset += m.ByteOffset
	return &u
}

// member makes the Go field for the named member m at off.
func (b *typeBuilder) member(m *dwarf.StructField, off int64, t *tagDef) (field, error) {
	typ, err := b.goType(m.Type)
	if err != nil {
		return field{}, fmt.Errorf("%s: %w", m.Name, err)
	}
	if t != nil && b.isPointer(t, m.Name) {
		if typ.expr != "uint64" {
			return field{}, fmt.Errorf("%s: listed as a pointer, but not a __u64", m.Name)
		}
		typ = b.pointer
		typ.note = "user-space address"
	}
	return field{name: goName(m.Name), typ: typ, off: off, c: []string{m.Name}, comment: typ.note, decl: cDecl(m.Type, m.Name)}, nil
}

func (b *typeBuilder) isPointer(t *tagDef, name string) bool {
	return slices.Contains(t.ptrs, name) ||
		slices.Contains(pointerFields["*"], name) ||
		slices.Contains(pointerFields[t.tag], name)
}

// goType returns the Go type for a member's C type.
func (b *typeBuilder) goType(t dwarf.Type) (gotype, error) {
	switch t := t.(type) {
	case *dwarf.TypedefType:
		g, err := b.goType(t.Type)
		switch t.Name {
		case "__be16", "__be32", "__be64":
			g.note = t.Name
		}
		return g, err
	case *dwarf.QualType:
		return b.goType(t.Type)
	case *dwarf.UintType, *dwarf.UcharType:
		return scalar("uint", t.Size())
	case *dwarf.CharType:
		// Plain char, whose sign differs between ABIs (x86's is signed,
		// arm64's not), holds bytes here (sockaddr_storage's __data).
		return scalar("uint", t.Size())
	case *dwarf.IntType, *dwarf.EnumType:
		return scalar("int", t.Size())
	case *dwarf.ArrayType:
		if t.StrideBitSize != 0 {
			return gotype{}, fmt.Errorf("array with a stride")
		}
		el, err := b.goType(t.Type)
		if err != nil {
			return gotype{}, err
		}
		n := max(t.Count, 0) // a flexible array: zero here
		return gotype{expr: fmt.Sprintf("[%d]%s", n, el.expr), size: n * el.size, align: el.align, note: el.note}, nil
	case *dwarf.StructType:
		if t.StructName != "" {
			def := b.tags[t.Kind+" "+t.StructName]
			if def == nil {
				if t.Kind == "union" {
					return gotype{expr: fmt.Sprintf("[%d]byte", t.ByteSize), size: t.ByteSize, align: 1, note: unionDoc(t)}, nil
				}
				return gotype{}, fmt.Errorf("%s %s is not mirrored", t.Kind, t.StructName)
			}
			m, err := b.mirrorOf(def)
			if err != nil {
				return gotype{}, err
			}
			return gotype{expr: m.goName, size: m.size, align: m.align}, nil
		}
		if t.Kind == "union" {
			return gotype{expr: fmt.Sprintf("[%d]byte", t.ByteSize), size: t.ByteSize, align: 1, note: unionDoc(t)}, nil
		}
		fields, dropped, err := b.fields(t, nil)
		if err != nil {
			return gotype{}, err
		}
		if len(dropped) > 0 {
			return gotype{}, fmt.Errorf("flexible array in an inline struct")
		}
		var s strings.Builder
		s.WriteString("struct {\n_ structs.HostLayout\n")
		for _, f := range fields {
			writeField(&s, f)
		}
		s.WriteString("}")
		return gotype{expr: s.String(), size: t.ByteSize, align: alignOf(fields), inner: fields}, nil
	}
	return gotype{}, fmt.Errorf("no Go mirror for C type %s (%T)", t, t)
}

func scalar(kind string, size int64) (gotype, error) {
	switch size {
	case 1, 2, 4, 8:
		return gotype{expr: fmt.Sprintf("%s%d", kind, 8*size), size: size, align: size}, nil
	}
	return gotype{}, fmt.Errorf("%d-byte integer", size)
}

// unionDoc describes a union's members for a comment:
// "union { __be32 imm_data; __u32 invalidate_rkey; }".
func unionDoc(u *dwarf.StructType) string {
	var b strings.Builder
	b.WriteString("union {")
	for _, m := range u.Field {
		fmt.Fprintf(&b, " %s;", cDecl(unwrapFlex(m).Type, unwrapFlex(m).Name))
	}
	b.WriteString(" }")
	return b.String()
}

// cDecl spells a C declaration, briefly: the members of an anonymous
// aggregate are listed, those of a named member's inline type are not.
func cDecl(t dwarf.Type, name string) string {
	var s string
	switch t := t.(type) {
	case *dwarf.PtrType:
		return cDecl(t.Type, "*"+name)
	case *dwarf.ArrayType:
		n := ""
		if t.Count > 0 {
			n = fmt.Sprint(t.Count)
		}
		return cDecl(t.Type, fmt.Sprintf("%s[%s]", name, n))
	case *dwarf.StructType:
		switch {
		case t.StructName != "":
			s = t.Kind + " " + t.StructName
		case name != "":
			s = t.Kind + " {...}"
		default:
			var b strings.Builder
			b.WriteString(t.Kind + " {")
			for _, m := range t.Field {
				fmt.Fprintf(&b, " %s;", cDecl(m.Type, m.Name))
			}
			return b.String() + " }"
		}
	case *dwarf.TypedefType:
		s = t.Name
	default:
		s = t.String()
	}
	return strings.TrimSpace(s + " " + name)
}
