//go:build !linux

package uverbs_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

// On a system without RDMA verbs every entry point fails with an
// *OpError that wraps ErrNotSupported and says why, and no method panics,
// on zero values and nil receivers alike.
func TestUnsupportedOS(t *testing.T) {
	var (
		ctx  *uverbs.Context
		pd   *uverbs.PD
		mr   *uverbs.MR
		qp   *uverbs.QP
		ah   *uverbs.AH
		buf  *uverbs.Buffer
		zero = new(uverbs.Context)
	)
	calls := []struct {
		op   string // the OpError's Op
		call func() error
	}{
		{"list devices", func() error { _, err := uverbs.Devices(); return err }},
		{"open", func() error { _, err := uverbs.DeviceByName("rxe0"); return err }},
		{"open", func() error { _, err := uverbs.Open("rxe0"); return err }},
		{"open", func() error { _, err := uverbs.Device{Name: "rxe0"}.Open(); return err }},
		{"alloc buffer", func() error { _, err := uverbs.AllocBuffer(4096); return err }},
		{"close", ctx.Close},
		{"close", zero.Close},
		{"alloc pd", func() error { _, err := ctx.AllocPD(); return err }},
		{"create comp channel", func() error { _, err := ctx.NewCompChannel(); return err }},
		{"create cq", func() error { _, err := zero.NewCQ(cq.Config{Size: 16, UserValue: 1}); return err }},
		{"query device", func() error { _, err := ctx.QueryDevice(); return err }},
		{"query port", func() error { _, err := ctx.QueryPort(1); return err }},
		{"query gid", func() error { _, err := ctx.QueryGID(1, 0); return err }},
		{"query gid", func() error { _, err := ctx.GIDTable(1); return err }},
		{"get async event", func() error { _, _, err := ctx.TryAsyncEvent(); return err }},
		{"get async event", func() error { _, err := ctx.WaitAsyncEvent(context.Background()); return err }},
		{"dealloc pd", pd.Close},
		{"reg mr", func() error { _, err := pd.RegMR(make([]byte, 64), uverbs.AccessLocalWrite); return err }},
		{"create qp", func() error { _, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.RC}); return err }},
		{"create ah", func() error { _, err := pd.NewAH(uverbs.AHAttr{Port: 1}); return err }},
		{"dereg mr", mr.Close},
		{"post send", func() error { _, err := qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend}}); return err }},
		{"post recv", func() error { _, err := qp.PostRecv([]uverbs.RecvWR{{WRID: 1}}); return err }},
		{"modify qp", func() error { return qp.Modify(&uverbs.QPAttr{State: uverbs.QPInit}, uverbs.QPAttrState) }},
		{"query qp", func() error { _, err := qp.Query(uverbs.QPAttrState); return err }},
		{"destroy qp", qp.Close},
		{"find gid", func() error { _, err := ctx.FindGID(1, uverbs.GIDTypeRoCEv2, netip.Addr{}); return err }},
		{"connect rc", func() error { return qp.ConnectRC(uverbs.Endpoint{}, uverbs.Endpoint{}, nil) }},
		{"connect ud", func() error { return qp.ConnectUD(uverbs.Endpoint{}, nil) }},
		{"create ah", func() error { _, err := pd.NewAHTo(uverbs.Endpoint{}, uverbs.Endpoint{}, nil); return err }},
		{"post send", func() error { return qp.PostSendInline(uverbs.SendWR{Opcode: uverbs.WRSend}, []byte("hi")) }},
		{"destroy ah", ah.Close},
		{"free buffer", buf.Close},
		{"make sge", func() error { _, err := mr.SGE(0, 8); return err }},
	}
	want := "goverbs: RDMA verbs are not supported on " + runtime.GOOS
	for _, c := range calls {
		t.Run(c.op, func(t *testing.T) {
			err := c.call()
			if !errors.Is(err, uverbs.ErrNotSupported) || !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("error %v does not wrap ErrNotSupported", err)
			}
			var op *uverbs.OpError
			if !errors.As(err, &op) || op.Op != c.op {
				t.Errorf("error %v: want an *OpError for %q", err, c.op)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, c.op) || !strings.HasSuffix(msg, want) {
				t.Errorf("error %q: want %q … %q", msg, c.op, want)
			}
		})
	}
	// The getters answer zero values.
	if ctx.NumCompVectors() != 0 || ctx.Device() != (uverbs.Device{}) || pd.Context() != nil ||
		mr.LKey() != 0 || mr.RKey() != 0 || mr.Addr() != 0 || mr.Bytes() != nil || mr.PD() != nil ||
		buf.Bytes() != nil || qp.QPN() != 0 || qp.Type() != 0 ||
		qp.Cap() != (uverbs.QPCap{}) || qp.PD() != nil || qp.EventHandle() != 0 || qp.UserValue() != 0 {
		t.Error("a getter of a stub returned a non-zero value")
	}
}

// The message names the verb, the device and the system.
func ExampleOpen_unsupported() {
	_, err := uverbs.Open("rxe0")
	if errors.Is(err, uverbs.ErrNotSupported) {
		fmt.Println(strings.Replace(err.Error(), runtime.GOOS, "GOOS", 1))
	}
	// Output: open rxe0: goverbs: RDMA verbs are not supported on GOOS
}
