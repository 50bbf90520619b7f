package uverbs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/goverbs/goverbs/cq"
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
	q, err := c.NewCQ(cq.Config{Size: 16})
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
	closedCQ, err := e.ctx.NewCQ(cq.Config{Size: 4})
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

// A Modify to RESET, a CQ.Close and a Context.Close at once never
// deadlock (issue 36: Modify held the context while it waited for the
// CQ's lock, to clean the QP's completions out of the CQ; CQ.Close held
// that lock while it waited for the context, which a pending
// Context.Close kept it from getting). On the mlx5 model, whose QP reset
// cleans its CQs.
func TestResetRacesCloseNoDeadlock(t *testing.T) {
	t.Setenv(rdmatest.EnvDevice, rdmatest.ModelDevice)
	e := newModelQPEnv(t)
	qp, err := e.pd.NewQP(uverbs.QPConfig{Type: uverbs.RC, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctxClosed, cqClosed, modified := make(chan error, 1), make(chan error, 1), make(chan error, 1)
	restore := uverbs.SetQPCmdHook(func() {
		go func() { ctxClosed <- e.ctx.Close() }()
		time.Sleep(50 * time.Millisecond) // Context.Close waits for the Modify
		go func() { cqClosed <- e.cq.Close() }()
		time.Sleep(50 * time.Millisecond) // CQ.Close holds the CQ's lock, waits for the context
	})
	defer restore()
	go func() { modified <- qp.Modify(&uverbs.QPAttr{State: uverbs.QPReset}, uverbs.QPAttrState) }()
	for _, w := range []struct {
		what string
		c    chan error
		ok   func(error) bool
	}{
		{"Modify to RESET", modified, func(err error) bool { return err == nil }},
		{"Context.Close", ctxClosed, func(err error) bool { return err == nil }},
		{"CQ.Close", cqClosed, func(err error) bool { return err == nil || errors.Is(err, uverbs.ErrClosed) }},
	} {
		select {
		case err := <-w.c:
			if !w.ok(err) {
				t.Errorf("%s: %v", w.what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s has not returned in 10 s: deadlock", w.what)
		}
	}
}
