package uverbs_test

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uverbs"
)

func TestCompChannelAndCQ(t *testing.T) {
	c := openRXE(t)
	testutil.CheckFDLeak(t)
	ch, err := c.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	// ibv_create_cq(3): "the CQ will have at least cqe entries".
	for _, tt := range []struct {
		size    int
		opts    []cq.Option
		atLeast int
	}{
		{1, nil, 1},
		{10, []cq.Option{cq.WithChannel(ch)}, 10},
		{256, []cq.Option{cq.WithChannel(ch), cq.WithVector(c.NumCompVectors() - 1), cq.WithUserValue(42)}, 256},
		{32767, nil, 32767}, // rxe's max_cqe
	} {
		q, err := c.NewCQ(tt.size, tt.opts...)
		if err != nil {
			t.Fatalf("NewCQ(%d): %v", tt.size, err)
		}
		if q.Size() < tt.atLeast {
			t.Errorf("NewCQ(%d).Size() = %d", tt.size, q.Size())
		}
		t.Logf("asked %d, got %d", tt.size, q.Size())
		if len(tt.opts) == 3 && (q.UserValue() != 42 || q.Channel() != ch || q.Vector() != c.NumCompVectors()-1) {
			t.Errorf("options not kept: user %d channel %p vector %d", q.UserValue(), q.Channel(), q.Vector())
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		if err := q.Close(); !errors.Is(err, cq.ErrClosed) {
			t.Errorf("second CQ Close: %v", err)
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatalf("closing the idle channel: %v", err)
	}
	if err := ch.Close(); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("second channel Close: %v", err)
	}
	if _, err := c.NewCQ(4, cq.WithChannel(ch)); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("NewCQ on a closed channel: %v", err)
	}
}

func TestNewCQBadInput(t *testing.T) {
	c := openRXE(t)
	testutil.CheckFDLeak(t)
	for _, tt := range []struct {
		name string
		size int
		opts []cq.Option
	}{
		{"cqe 0", 0, nil},
		{"cqe negative", -5, nil},
		{"cqe above max_cqe", 32768, nil},
		{"cqe huge", 1<<31 - 1, nil},
		{"vector negative", 4, []cq.Option{cq.WithVector(-1)}},
		{"vector = num_comp_vectors", 4, []cq.Option{cq.WithVector(c.NumCompVectors())}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, err := c.NewCQ(tt.size, tt.opts...)
			if err == nil {
				q.Close()
				t.Fatal("accepted")
			}
			var op *uverbs.OpError
			if !errors.Is(err, unix.EINVAL) || !errors.As(err, &op) || op.Op != "create cq" {
				t.Errorf("err = %v, want a create cq *OpError wrapping EINVAL", err)
			}
			t.Log(err)
		})
	}
}

func TestCQUseAfterContextClose(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	c, err := uverbs.Open("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.NewCQ(8)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := q.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("closing a CQ after its context: %v", err)
	}
	// The CQ is gone with its context: its ring is unmapped, and polling
	// it is an error, not a crash.
	if _, err := q.Poll(make([]cq.WC, 4)); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("Poll after the context closed: %v", err)
	}
	if err := q.Close(); !errors.Is(err, cq.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.NewCQ(8); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("NewCQ after Close: %v", err)
	}
	if _, err := c.NewCompChannel(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("NewCompChannel after Close: %v", err)
	}
}
