package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLdd(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffd4d7f2000)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e6c5a5000)\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f0e6c7a2000)\n" +
		"\tlibmissing.so => not found\n"
	want := []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if diff := cmp.Diff(want, parseLdd(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
