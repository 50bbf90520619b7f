package uverbs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// A Query or Modify that has found its QP open holds the QP until its
// command is sent: a Close racing it waits, so no command carries a
// handle the kernel may already have given to another QP (issue 36).
// After Close both return ErrClosed.
func TestQPCommandHoldsOffClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(q *uverbs.QP) error
	}{
		{"query", func(q *uverbs.QP) error { _, err := q.Query(uverbs.QPAttrState); return err }},
		{"modify", func(q *uverbs.QP) error {
			return q.Modify(&uverbs.QPAttr{State: uverbs.QPReset}, uverbs.QPAttrState)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newModelQPEnv(t)
			qp, err := e.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: e.cq, RecvCQ: e.cq,
				Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				t.Fatal(err)
			}
			closed := make(chan error, 1)
			closedEarly := false
			restore := uverbs.SetQPCmdHook(func() {
				go func() { closed <- qp.Close() }()
				select {
				case <-closed:
					closedEarly = true
				case <-time.After(200 * time.Millisecond):
				}
			})
			err = tc.call(qp)
			restore()
			if closedEarly {
				t.Fatalf("Close returned while %s was between its check and its command", tc.name)
			}
			if err != nil {
				t.Fatalf("%s that found the QP open: %v", tc.name, err)
			}
			if err := <-closed; err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := tc.call(qp); !errors.Is(err, uverbs.ErrClosed) {
				t.Fatalf("%s after Close: %v, want ErrClosed", tc.name, err)
			}
		})
	}
}

// newModelQPEnv is newQPEnv on the test device: rxe0, or the mlx5 model
// with GOVERBS_TEST_DEVICE=mlx5model.
func newModelQPEnv(t *testing.T) *qpEnv {
	c := rdmatest.Open(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.NewCQ(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close(); pd.Close() })
	return &qpEnv{ctx: c, pd: pd, cq: q}
}

// A closed CQ given to NewQP is ErrClosed, named as the send or receive
// CQ, not the kernel's ENOENT for a handle it no longer has (issue 36).
func TestNewQPClosedCQ(t *testing.T) {
	e := newModelQPEnv(t)
	closedCQ, err := e.ctx.NewCQ(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := closedCQ.Close(); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []uverbs.QPConfig{
		{Type: uverbs.RC, SendCQ: closedCQ, RecvCQ: e.cq},
		{Type: uverbs.RC, SendCQ: e.cq, RecvCQ: closedCQ},
	} {
		cfg.Cap = uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}
		qp, err := e.pd.NewQP(cfg)
		if err == nil {
			qp.Close()
		}
		if !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("NewQP with a closed CQ: %v, want ErrClosed", err)
		}
	}
}
