package kverbs_test

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// bytesOf is v's memory, for a driver's data.
func bytesOf[T any](v *T) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v)) }

// The SRQ commands on rxe0, through the ioctl methods and through the
// legacy write commands (the methods hidden, as on a kernel without
// them): create with rxe's response (its queue's mmap information),
// query, arm the limit, refuse to destroy while a QP receives through
// it (EBUSY), destroy.
func TestSRQCommands(t *testing.T) {
	for _, path := range []struct {
		name  string
		tweak func(*transport.Conn)
	}{
		{"ioctl", nil},
		{"write", func(c *transport.Conn) {
			c.Hide(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_CREATE)
			c.Hide(uapi.UVERBS_OBJECT_SRQ, uapi.UVERBS_METHOD_SRQ_DESTROY)
		}},
	} {
		t.Run(path.name, func(t *testing.T) {
			c := conn(t, path.tweak)
			pd, err := kverbs.AllocPD(c)
			if err != nil {
				t.Fatal(err)
			}
			var srqResp uapi.RxeCreateSRQResp
			srq, err := kverbs.CreateSRQ(c, kverbs.SRQReq{PD: pd, UserHandle: 7, MaxWR: 64, MaxSGE: 2}, nil, bytesOf(&srqResp))
			if err != nil {
				t.Fatal(err)
			}
			// The core's SRQ number is an XRC SRQ's alone: rxe gives a
			// basic one's in its own response.
			if srq.MaxWR < 64 || srq.MaxSGE < 2 || srq.SRQN != 0 {
				t.Errorf("created %+v, want at least 64 WRs and 2 SGEs, and no core SRQ number", srq)
			}
			if srqResp.Mi.Size == 0 || srqResp.SRQNum == 0 {
				t.Errorf("rxe's response %+v: want its queue's mmap information and SRQ number", srqResp)
			}
			a, err := kverbs.QuerySRQ(c, srq.Handle)
			if err != nil {
				t.Fatal(err)
			}
			// rxe makes a power of two less one; 6.1's SRQ_CREATE answers
			// with the size asked for, 6.12's and the write command with
			// the size made.
			if a.MaxWR < srq.MaxWR || a.MaxSGE != srq.MaxSGE || a.Limit != 0 {
				t.Errorf("query %+v, want at least %d WRs, %d SGEs, no limit", a, srq.MaxWR, srq.MaxSGE)
			}
			// rxe reads its command (where a resize's mmap information
			// goes) whatever the mask says.
			var mi uapi.Mminfo
			mod := uapi.RxeModifySRQCmd{MmapInfoAddr: uapi.NewPointer(unsafe.Pointer(&mi))}
			if err := kverbs.ModifySRQ(c, srq.Handle, kverbs.SRQLimit, kverbs.SRQAttr{Limit: 16}, bytesOf(&mod)); err != nil {
				t.Fatal(err)
			}
			if a, err := kverbs.QuerySRQ(c, srq.Handle); err != nil || a.Limit != 16 {
				t.Errorf("query after arming the limit at 16: %+v, %v", a, err)
			}
			if err := kverbs.ModifySRQ(c, srq.Handle, kverbs.SRQLimit, kverbs.SRQAttr{Limit: a.MaxWR + 1}, bytesOf(&mod)); !errors.Is(err, unix.EINVAL) {
				t.Errorf("a limit above the SRQ's size (%d): %v, want EINVAL", a.MaxWR, err)
			}

			var cqResp uapi.RxeCreateCQResp
			cq, err := kverbs.CreateCQ(c, kverbs.CQReq{CQE: 16, Channel: -1}, nil, bytesOf(&cqResp))
			if err != nil {
				t.Fatal(err)
			}
			var qpResp uapi.RxeCreateQPResp
			qp, err := kverbs.CreateQP(c, kverbs.QPReq{PD: pd, SendCQ: cq.Handle, RecvCQ: cq.Handle, SRQ: srq.Handle, HasSRQ: true,
				Type: uapi.IB_UVERBS_QPT_RC, Cap: kverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}}, nil, bytesOf(&qpResp))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kverbs.DestroySRQ(c, srq.Handle); !errors.Is(err, unix.EBUSY) {
				t.Errorf("destroy an SRQ a QP receives through: %v, want EBUSY", err)
			}
			if _, err := kverbs.DestroyQP(c, qp.Handle); err != nil {
				t.Fatal(err)
			}
			if n, err := kverbs.DestroySRQ(c, srq.Handle); err != nil || n != 0 {
				t.Errorf("destroy: %d events reported, %v", n, err)
			}
			if _, err := kverbs.QuerySRQ(c, srq.Handle); err == nil {
				t.Error("query of a destroyed SRQ succeeded")
			}
		})
	}
}
