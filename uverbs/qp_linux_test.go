package uverbs_test

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

type qpEnv struct {
	ctx *uverbs.Context
	pd  *uverbs.PD
	cq  *cq.CQ
}

func newQPEnv(t *testing.T) *qpEnv {
	c := openRXE(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.NewCQ(cq.Config{Size: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close(); pd.Close() })
	return &qpEnv{ctx: c, pd: pd, cq: q}
}

func (e *qpEnv) qp(t *testing.T, typ uverbs.QPType) *uverbs.QP {
	t.Helper()
	qp, err := e.pd.NewQP(uverbs.QPConfig{Type: typ, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Close() })
	return qp
}

// Two RC QPs connected to each other in loopback over GID index 1 (RoCE
// v2 on rxe) reach RTS, with every attribute a RoCE v2 connection needs.
func TestRCLoopbackToRTS(t *testing.T) {
	e := newQPEnv(t)
	testutil.CheckFDLeak(t)
	a, b := e.qp(t, uverbs.RC), e.qp(t, uverbs.RC)
	if a.QPN() == b.QPN() || a.QPN() == 0 {
		t.Fatalf("QPNs %d %d", a.QPN(), b.QPN())
	}
	if c := a.Cap(); c.MaxSendWR < 16 || c.MaxRecvWR < 16 || c.MaxInlineData < 64 {
		t.Errorf("cap %+v smaller than asked", c)
	}
	gid := rdmatest.GID(t, 1)
	const psnA, psnB = 0x123, 0x456
	// ConnectRC looks up GID index 1 from the local endpoint's GID.
	ea := uverbs.Endpoint{QPN: a.QPN(), PSN: psnA, GID: gid}
	eb := uverbs.Endpoint{QPN: b.QPN(), PSN: psnB, GID: gid}
	opts := &uverbs.ConnectOptions{PathMTU: uverbs.MTU1024,
		Access: uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite}
	if err := a.ConnectRC(ea, eb, opts); err != nil {
		t.Fatal(err)
	}
	if err := b.ConnectRC(eb, ea, opts); err != nil {
		t.Fatal(err)
	}
	got, err := a.Query(uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrDestQPN | uverbs.QPAttrSQPSN | uverbs.QPAttrPathMTU)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != uverbs.QPRTS || got.DestQPN != b.QPN() || got.SQPSN != psnA || got.RQPSN != psnB || got.PathMTU != 3 ||
		got.AH.GRH.DGID != gid || got.AH.GRH.SGIDIndex != 1 || got.AH.GRH.HopLimit != 64 || !got.AH.IsGlobal ||
		got.Timeout != 14 || got.RetryCnt != 7 || got.RNRRetry != 7 || got.MinRNRTimer != 12 ||
		got.MaxRdAtomic != 1 || got.MaxDestRdAtomic != 1 ||
		got.AccessFlags != uverbs.AccessLocalWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteWrite {
		t.Errorf("query after RTS = %+v", got)
	}
	// A CQ a QP still uses cannot be destroyed.
	if err := e.cq.Close(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("closing a CQ in use: err = %v, want EBUSY", err)
	} else {
		t.Log(err)
	}
}

func TestUDToRTS(t *testing.T) {
	e := newQPEnv(t)
	qp := e.qp(t, uverbs.UD)
	gid := rdmatest.GID(t, 1)
	me := uverbs.Endpoint{QPN: qp.QPN(), PSN: 7, GID: gid}
	if err := qp.ConnectUD(me, nil); err != nil {
		t.Fatal(err)
	}
	got, err := qp.Query(uverbs.QPAttrState | uverbs.QPAttrQKey | uverbs.QPAttrSQPSN)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != uverbs.QPRTS || got.QKey != uverbs.DefaultQKey || got.SQPSN != 7 {
		t.Errorf("query after ConnectUD = %+v", got)
	}
	ah, err := e.pd.NewAHTo(me, me, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ah.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ah.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second AH Close: %v", err)
	}
}

func TestQPBadInput(t *testing.T) {
	e := newQPEnv(t)
	testutil.CheckFDLeak(t)
	other := openRXE(t)
	foreign, err := other.NewCQ(cq.Config{Size: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	for _, tt := range []struct {
		name string
		cfg  uverbs.QPConfig
	}{
		{"no CQs", uverbs.QPConfig{Type: uverbs.RC}},
		{"a CQ from another context", uverbs.QPConfig{Type: uverbs.RC, SendCQ: foreign, RecvCQ: e.cq}},
		{"bad type", uverbs.QPConfig{Type: 9, SendCQ: e.cq, RecvCQ: e.cq}},
		{"too many WRs", uverbs.QPConfig{Type: uverbs.RC, SendCQ: e.cq, RecvCQ: e.cq, Cap: uverbs.QPCap{MaxSendWR: 1 << 30}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			qp, err := e.pd.NewQP(tt.cfg)
			if err == nil {
				qp.Close()
				t.Fatal("accepted")
			}
			var op *uverbs.OpError
			if !errors.Is(err, unix.EINVAL) || !errors.As(err, &op) || op.Op != "create qp" {
				t.Errorf("err = %v, want a create qp *OpError wrapping EINVAL", err)
			}
			t.Log(err)
		})
	}
	qp := e.qp(t, uverbs.RC)
	// RESET → RTS skips states: the kernel refuses.
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPRTS}, uverbs.QPAttrState); !errors.Is(err, unix.EINVAL) {
		t.Errorf("RESET → RTS: err = %v, want EINVAL", err)
	}
	if err := qp.Modify(&uverbs.QPAttr{}, 0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("empty mask: err = %v, want EINVAL", err)
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPInit, Port: 7}, uverbs.QPAttrState|uverbs.QPAttrPort|uverbs.QPAttrPKeyIndex|uverbs.QPAttrAccessFlags); !errors.Is(err, unix.EINVAL) {
		t.Errorf("bad port: err = %v, want EINVAL", err)
	}
	if err := qp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := qp.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second QP Close: %v", err)
	}
	if _, err := qp.Query(uverbs.QPAttrState); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Query after Close: %v", err)
	}
}
