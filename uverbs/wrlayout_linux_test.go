package uverbs

import (
	"reflect"
	"testing"

	"github.com/goverbs/goverbs/internal/provider"
)

// PostSend and PostRecv hand the callers' requests to the provider as
// they are (providerSendWRs, providerRecvWRs): the layouts must agree
// field by field, in offset, size and kind, so that the garbage collector
// sees pointers where they are. The compile-time checks in qp_linux.go
// pin offsets; this pins kinds and sizes too.
func TestWRLayoutsAgree(t *testing.T) {
	for _, tt := range []struct{ ours, theirs any }{
		{SendWR{}, provider.SendWR{}},
		{RecvWR{}, provider.RecvWR{}},
		{SGE{}, provider.SGE{}},
		{MWBind{}, provider.MWBindRef{}},
	} {
		a, b := reflect.TypeOf(tt.ours), reflect.TypeOf(tt.theirs)
		if a.Size() != b.Size() || a.NumField() != b.NumField() {
			t.Fatalf("%v: %d bytes in %d fields, %v: %d in %d", a, a.Size(), a.NumField(), b, b.Size(), b.NumField())
		}
		for i := range a.NumField() {
			fa, fb := a.Field(i), b.Field(i)
			if fa.Offset != fb.Offset || fa.Type.Size() != fb.Type.Size() || fa.Type.Kind() != fb.Type.Kind() {
				t.Errorf("%v.%s (%v at %d) and %v.%s (%v at %d) differ", a, fa.Name, fa.Type, fa.Offset, b, fb.Name, fb.Type, fb.Offset)
			}
		}
	}
	if f, _ := reflect.TypeOf(AH{}).FieldByName("p"); f.Offset != 0 || f.Type != reflect.TypeOf(provider.AHRef{}).Field(0).Type {
		t.Errorf("AH.p is a %v at %d, want the provider's AH first", f.Type, f.Offset)
	}
	if f, _ := reflect.TypeOf(MW{}).FieldByName("ref"); f.Offset != 0 || f.Type != reflect.TypeOf(provider.MWRef{}) {
		t.Errorf("MW.ref is a %v at %d, want a provider.MWRef first", f.Type, f.Offset)
	}
	if f, _ := reflect.TypeOf(MR{}).FieldByName("ref"); f.Offset != 0 || f.Type != reflect.TypeOf(provider.MRRef{}) {
		t.Errorf("MR.ref is a %v at %d, want a provider.MRRef first", f.Type, f.Offset)
	}
}
