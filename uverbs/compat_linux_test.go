package uverbs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// Kernel-version differences are probed, not assumed: with the newer ioctl
// methods hidden, as on a kernel before 5.0, every verb takes its legacy
// write-command path through write(2) and still works.
func TestOldKernelPaths(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.CheckFDLeak(t)
	uverbs.SetTestConnHook(func(c *transport.Conn) {
		for _, m := range [][2]uint16{
			{uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_INVOKE_WRITE},
			{uapi.UVERBS_OBJECT_DEVICE, uapi.UVERBS_METHOD_GET_CONTEXT},
			{uapi.UVERBS_OBJECT_PD, uapi.UVERBS_METHOD_PD_DESTROY},
			{uapi.UVERBS_OBJECT_MR, uapi.UVERBS_METHOD_MR_DESTROY},
			{uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_CREATE},
			{uapi.UVERBS_OBJECT_CQ, uapi.UVERBS_METHOD_CQ_DESTROY},
			{uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_CREATE},
			{uapi.UVERBS_OBJECT_QP, uapi.UVERBS_METHOD_QP_DESTROY},
			{uapi.UVERBS_OBJECT_AH, uapi.UVERBS_METHOD_AH_DESTROY},
		} {
			c.Hide(m[0], m[1])
		}
	})
	defer uverbs.SetTestConnHook(nil)
	c, err := uverbs.Open("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.NewCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.NewCQ(cq.Config{Size: 10, Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	if q.Size() < 10 {
		t.Errorf("CQ size %d", q.Size())
	}
	qp, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.UD, SendCQ: q, RecvCQ: q,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPInit, Port: 1, QKey: 1},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrQKey); err != nil {
		t.Fatal(err)
	}
	ah, err := pd.NewAH(uverbs.AHAttr{IsGlobal: true, Port: 1, GRH: uverbs.GlobalRoute{DGID: rdmatest.GID(t, 1), SGIDIndex: 1, HopLimit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range []interface{ Close() error }{ah, qp, q, ch, mr, pd} {
		if err := cl.Close(); err != nil {
			t.Fatalf("%T.Close: %v", cl, err)
		}
	}
}

// A feature with no fallback gives an error that names it and the first
// kernel that has it.
func TestMissingFeatureError(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	testutil.CheckFDLeak(t)
	uverbs.SetTestConnHook(func(c *transport.Conn) {
		c.Hide(uapi.UVERBS_OBJECT_ASYNC_EVENT, uapi.UVERBS_METHOD_ASYNC_EVENT_ALLOC)
	})
	defer uverbs.SetTestConnHook(nil)
	c, err := uverbs.Open("rxe0")
	if err == nil {
		c.Close()
		t.Fatal("Open succeeded without ASYNC_EVENT_ALLOC")
	}
	var ufe *uverbs.UnsupportedFeatureError
	if !errors.Is(err, uverbs.ErrNotSupported) || !errors.As(err, &ufe) || ufe.MinKernel != "5.6" ||
		!strings.Contains(err.Error(), "ASYNC_EVENT_ALLOC") {
		t.Errorf("err = %v, want an UnsupportedFeatureError naming ASYNC_EVENT_ALLOC and 5.6", err)
	}
	t.Log(err)
}
