package uverbs_test

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/uverbs"
)

// rxe's P_Key table is one entry, the default full-membership P_Key.
func TestQueryPKey(t *testing.T) {
	c := openRXE(t)
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if pa.PkeyTblLen != 1 {
		t.Errorf("P_Key table of %d entries, want rxe's 1", pa.PkeyTblLen)
	}
	if k, err := c.QueryPKey(1, 0); err != nil || k != 0xffff {
		t.Errorf("P_Key 0: %#x, %v; want 0xffff", k, err)
	}
	if i, err := c.PKeyIndex(1, 0xffff); err != nil || i != 0 {
		t.Errorf("index of 0xffff: %d, %v; want 0", i, err)
	}
	for _, bad := range []struct {
		name string
		err  error
		want error
	}{
		{"index past the table", func() error { _, err := c.QueryPKey(1, pa.PkeyTblLen); return err }(), unix.EINVAL},
		{"negative index", func() error { _, err := c.QueryPKey(1, -1); return err }(), unix.EINVAL},
		{"port 2", func() error { _, err := c.QueryPKey(2, 0); return err }(), unix.EINVAL},
		{"a limited member's P_Key", func() error { _, err := c.PKeyIndex(1, 0x7fff); return err }(), unix.ENOENT},
	} {
		if !errors.Is(bad.err, bad.want) {
			t.Errorf("%s: %v, want %v", bad.name, bad.err, bad.want)
		}
	}
	c.Close()
	if _, err := c.QueryPKey(1, 0); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}
